declare namespace tools {
  /** Allocate and touch `mib` MiB of memory. */
  function allocate(input: {mib: number}): Promise<string>;
  /** Request permission for `action` on `resource`. */
  function ask(input: {action: string, resource: string}): Promise<string>;
  /** Return metadata that is not a JSON object. */
  function bad_metadata(input: {[key: string]: unknown}): Promise<string>;
  /** Return output that violates its schema. */
  function bad_output(input: {[key: string]: unknown}): Promise<{count: number}>;
  /** Report progress `started`, then do `iterations` rounds of arithmetic (forever if absent). */
  function busy(input: {iterations?: number | null}): Promise<{checksum: number}>;
  /** Do `iterations` rounds of integer arithmetic. */
  function compute(input: {iterations: number}): Promise<{checksum: number}>;
  /** Increment a global counter and return it. */
  function counter(input: {[key: string]: unknown}): Promise<{count: number}>;
  /** Repeat a message back unchanged. */
  function echo(input: {message: string}): Promise<{message: string}>;
  /** Report progress, then fail with `message` (and `metadata`). */
  function fail(input: {message: string, metadata?: unknown}): Promise<string>;
  /** Return metadata with a `kib` KiB string field. */
  function huge_metadata(input: {kib: number}): Promise<string>;
  /** Return `bytes` bytes of application/octet-stream media. */
  function media(input: {bytes: number}): Promise<string>;
  /** Return an empty response. */
  function no_content(input: {[key: string]: unknown}): Promise<string>;
  /** Panic. */
  function panic(input: {[key: string]: unknown}): Promise<string>;
  /** Write `stdout` and `stderr` to the standard streams, `repeat` times. */
  function print(input: {repeat?: number | null, stderr: string, stdout: string}): Promise<string>;
  /** Return the plugin configuration this call sees. */
  function read_config(input: {[key: string]: unknown}): Promise<{config: unknown}>;
  /** Read the environment variable `name`. */
  function read_env(input: {name: string}): Promise<{value?: string | null}>;
  /** Recurse `depth` levels deep. */
  function recurse(input: {depth: number}): Promise<string>;
  /** Find every match of a regular expression in a text, with 1-based line numbers. */
  function regex_search(input: {pattern: string, text: string}): Promise<{matches: Array<{line: number, text: string}>}>;
  /** Try to register a tool outside activation. */
  function register_late(input: {[key: string]: unknown}): Promise<string>;
  /** Loop forever. */
  function spin_forever(input: {[key: string]: unknown}): Promise<string>;
  /** Count the words, lines and bytes of a text. */
  function word_count(input: {text: string}): Promise<{bytes: number, lines: number, words: number}>;
}
