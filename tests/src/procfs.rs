//! What Linux's `/proc` says of a process or thread: its state and nice
//! value, for tests of what runs at which CPU priority and what has ended.

/// The fields of `/proc/{task}/stat` after the name, from the state (field
/// 3) on; none once it is gone. `task` is a pid, `self`, or
/// `self/task/{tid}` for one of this process's threads.
pub fn stat_after_name(task: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{task}/stat")).ok()?;
    // The name is in parentheses and may hold spaces or `)`: the last `) `
    // ends it.
    let (_, rest) = stat.rsplit_once(") ")?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The nice value of `task` (field 19 of its stat).
pub fn nice_of(task: &str) -> i32 {
    let fields = stat_after_name(task).unwrap_or_else(|| panic!("no /proc/{task}/stat"));
    fields[16].parse().expect("a nice value")
}

/// This process's thread named `name`, as `self/task/{tid}`.
pub fn thread_named(name: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/task")
        .ok()?
        .flatten()
        .map(|entry| format!("self/task/{}", entry.file_name().to_string_lossy()))
        .find(|task| {
            std::fs::read_to_string(format!("/proc/{task}/comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
}
