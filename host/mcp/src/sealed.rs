//! Sealed approvals (R39): a 2026-07-28 permission question ends the
//! request with `input_required` and a `requestState` that carries, sealed
//! with AEAD (ChaCha20-Poly1305, ring) under a key the replicas share, who
//! asked, in which session, for which tool and arguments, until when, and
//! the answers given so far. The retry, on any replica, opens it, checks
//! each binding, and re-runs the call from the start with those answers:
//! nothing waits in one process's memory between requests.
//!
//! This is safe because tools ask before their side effects (the seed's
//! rule: leaves own permission and side-effect ordering), so the run that
//! stopped at the question did nothing the re-run repeats. A tool that acts
//! before it asks acts twice.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use toolhost::permission::{PermissionRequest, Reply};

/// How long a sealed state may be answered: as long as a person may take
/// to answer the question.
pub const SEALED_STATE_LIFETIME: Duration = Duration::from_secs(300);

/// Answers one sealed state carries at most: a call asks this many
/// questions at most before it is denied, so a state stays small.
pub const MAX_SEALED_ANSWERS: usize = 16;

/// The largest `requestState` opened; a bigger one is refused unread.
pub const MAX_SEALED_STATE_BYTES: usize = 16 << 10;

/// Bytes of a state key.
const KEY_BYTES: usize = 32;

/// The largest key file read.
const MAX_KEY_FILE_BYTES: u64 = 1 << 10;

/// What the sealed bytes are, so no other AEAD message of ours opens as
/// one.
const PURPOSE: &[u8] = b"toolhost requestState v1";

/// Why a key could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateKeyError {
    /// The key file could not be read.
    #[error("cannot read the state key file {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// The file holds no 32-byte key.
    #[error(
        "the state key file {path} must hold 32 random bytes as 64 hex digits or base64 (make one with `openssl rand -hex 32`)"
    )]
    Malformed {
        /// The file.
        path: String,
    },
}

/// The keys that seal and open request states: the current one, and the
/// one it replaced, still accepted while replicas rotate.
pub struct StateKeys {
    current: LessSafeKey,
    previous: Option<LessSafeKey>,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateKeys")
            .field("previous", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

impl StateKeys {
    /// A random key of this process: states open only here, so a single
    /// replica needs no key file.
    pub fn ephemeral() -> StateKeys {
        let mut bytes = [0; KEY_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system's random source works");
        StateKeys {
            current: key(&bytes),
            previous: None,
        }
    }

    /// The key in `current`, and the one in `previous` still accepted.
    pub fn from_files(current: &Path, previous: Option<&Path>) -> Result<StateKeys, StateKeyError> {
        Ok(StateKeys {
            current: read_key(current)?,
            previous: previous.map(read_key).transpose()?,
        })
    }

    fn seal(&self, state: &State) -> String {
        let mut nonce = [0; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the system's random source works");
        let mut data = serde_json::to_vec(state).expect("a state serializes");
        self.current
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(PURPOSE),
                &mut data,
            )
            .expect("sealing fits in memory");
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&data);
        URL_SAFE_NO_PAD.encode(sealed)
    }

    fn open(&self, text: &str) -> Option<State> {
        if text.len() > MAX_SEALED_STATE_BYTES {
            return None;
        }
        let sealed = URL_SAFE_NO_PAD.decode(text).ok()?;
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, data) = sealed.split_at(NONCE_LEN);
        let keys = std::iter::once(&self.current).chain(&self.previous);
        keys.into_iter().find_map(|key| {
            let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
            let mut data = data.to_vec();
            let plain = key
                .open_in_place(nonce, Aad::from(PURPOSE), &mut data)
                .ok()?;
            serde_json::from_slice(plain).ok()
        })
    }
}

fn key(bytes: &[u8]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, bytes).expect("a 32-byte key"))
}

fn read_key(path: &Path) -> Result<LessSafeKey, StateKeyError> {
    let shown = path.display().to_string();
    let text = toolhost::files::read_regular_file(path, MAX_KEY_FILE_BYTES).map_err(|e| {
        StateKeyError::Read {
            path: shown.clone(),
            reason: e.to_string(),
        }
    })?;
    let text = String::from_utf8_lossy(&text);
    let text = text.trim();
    let bytes = hex::decode(text)
        .ok()
        .or_else(|| base64::engine::general_purpose::STANDARD.decode(text).ok())
        .filter(|b| b.len() == KEY_BYTES)
        .ok_or(StateKeyError::Malformed { path: shown })?;
    Ok(key(&bytes))
}

/// What a sealed state says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct State {
    /// The caller's credential, by its stable name.
    caller: String,
    /// The scope (session) the call belongs to.
    session: String,
    tool: String,
    /// A digest of the call's arguments.
    arguments: String,
    /// Until when, in Unix seconds.
    expires: u64,
    /// The questions answered so far: (fingerprint, answer).
    answers: Vec<(String, Answer)>,
    /// The question this state asks.
    asking: String,
}

/// A reply, as a sealed state keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Once,
    Always,
    Reject,
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Answer {
        match reply {
            Reply::Once => Answer::Once,
            Reply::Always => Answer::Always,
            _ => Answer::Reject,
        }
    }
}

impl From<Answer> for Reply {
    fn from(answer: Answer) -> Reply {
        match answer {
            Answer::Once => Reply::Once,
            Answer::Always => Reply::Always,
            Answer::Reject => Reply::Reject,
        }
    }
}

/// What identifies one call for its sealed states: who, where, which tool
/// with which arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    pub(crate) caller: String,
    pub(crate) session: String,
    pub(crate) tool: String,
    pub(crate) arguments: String,
}

impl Binding {
    pub(crate) fn new(
        caller: &str,
        session: &str,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Binding {
        let text = serde_json::to_string(arguments).expect("JSON serializes");
        Binding {
            caller: caller.to_owned(),
            session: session.to_owned(),
            tool: tool.to_owned(),
            arguments: blake3::hash(text.as_bytes()).to_hex().to_string(),
        }
    }
}

/// The answers a call re-run from a sealed state already has, by question.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answers(Vec<(String, Answer)>);

impl Answers {
    /// The answer to `request`'s question, if the client gave one.
    pub(crate) fn to(&self, request: &PermissionRequest) -> Option<Reply> {
        let asked = fingerprint(request);
        self.0
            .iter()
            .find(|(question, _)| *question == asked)
            .map(|(_, answer)| (*answer).into())
    }

    /// Whether another question may be asked.
    pub(crate) fn room(&self) -> bool {
        self.0.len() < MAX_SEALED_ANSWERS
    }
}

/// Why a retry's `requestState` was refused. Each says what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error(
        "the requestState is not one this server sealed (tampered, or sealed under another key): call the tool again"
    )]
    Unreadable,
    #[error("the requestState has expired: call the tool again")]
    Expired,
    #[error("the requestState belongs to another caller or session: call the tool again")]
    OtherCaller,
    #[error(
        "the requestState was given for another tool or other arguments: retry with the exact call it answered"
    )]
    OtherCall,
}

/// A fingerprint of a permission question: who asks for what.
pub(crate) fn fingerprint(request: &PermissionRequest) -> String {
    let question = serde_json::json!([
        request.plugin,
        request.tool,
        request.action,
        request.resources,
        request.save
    ]);
    blake3::hash(question.to_string().as_bytes()).to_hex()[..32].to_owned()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl StateKeys {
    /// The state of `binding`'s call asking `asking`, with `answers` given.
    pub(crate) fn ask(&self, binding: &Binding, answers: &Answers, asking: &str) -> String {
        self.seal(&State {
            caller: binding.caller.clone(),
            session: binding.session.clone(),
            tool: binding.tool.clone(),
            arguments: binding.arguments.clone(),
            expires: now() + SEALED_STATE_LIFETIME.as_secs(),
            answers: answers.0.clone(),
            asking: asking.to_owned(),
        })
    }

    /// Opens a retry's `state` for `binding`'s call, with `reply` the
    /// client's answer to the question it asked: every answer so far.
    pub(crate) fn answered(
        &self,
        state: &str,
        binding: &Binding,
        reply: Reply,
    ) -> Result<Answers, Refused> {
        let state = self.open(state).ok_or(Refused::Unreadable)?;
        if state.expires < now() {
            return Err(Refused::Expired);
        }
        if state.caller != binding.caller || state.session != binding.session {
            return Err(Refused::OtherCaller);
        }
        if state.tool != binding.tool || state.arguments != binding.arguments {
            return Err(Refused::OtherCall);
        }
        let mut answers = state.answers;
        answers.retain(|(question, _)| *question != state.asking);
        answers.push((state.asking, reply.into()));
        answers.truncate(MAX_SEALED_ANSWERS);
        Ok(Answers(answers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(tool: &str) -> Binding {
        let arguments = serde_json::json!({"path": "/tmp/x"});
        Binding::new(
            "token:ab",
            "stateless:token:ab",
            tool,
            arguments.as_object().unwrap(),
        )
    }

    #[test]
    fn r39_a_state_opens_only_for_its_own_call_and_key() {
        let keys = StateKeys::ephemeral();
        let state = keys.ask(&binding("write_file"), &Answers::default(), "q1");
        let answers = keys
            .answered(&state, &binding("write_file"), Reply::Once)
            .unwrap();
        assert_eq!(answers.0, [("q1".to_owned(), Answer::Once)]);
        assert_eq!(
            keys.answered(&state, &binding("read_file"), Reply::Once)
                .unwrap_err(),
            Refused::OtherCall
        );
        let other = Binding {
            session: "client:token:ab:s2".into(),
            ..binding("write_file")
        };
        assert_eq!(
            keys.answered(&state, &other, Reply::Once).unwrap_err(),
            Refused::OtherCaller
        );
        // One ciphertext byte flipped, the encoding left valid: only the
        // AEAD tag can tell.
        let mut sealed = URL_SAFE_NO_PAD.decode(&state).unwrap();
        sealed[NONCE_LEN + 1] ^= 0x01;
        let tampered = URL_SAFE_NO_PAD.encode(&sealed);
        assert!(URL_SAFE_NO_PAD.decode(&tampered).is_ok());
        assert_eq!(
            keys.answered(&tampered, &binding("write_file"), Reply::Once)
                .unwrap_err(),
            Refused::Unreadable
        );
        // A hostile client's huge state is refused before it is decoded.
        let huge = "A".repeat(MAX_SEALED_STATE_BYTES + 1);
        assert_eq!(
            keys.answered(&huge, &binding("write_file"), Reply::Once)
                .unwrap_err(),
            Refused::Unreadable
        );
        let stranger = StateKeys::ephemeral();
        assert_eq!(
            stranger
                .answered(&state, &binding("write_file"), Reply::Once)
                .unwrap_err(),
            Refused::Unreadable
        );
    }

    #[test]
    fn r39_the_previous_key_opens_states_during_rotation_and_expiry_holds() {
        let old = StateKeys::ephemeral();
        let state = old.ask(&binding("t"), &Answers::default(), "q");
        let rotated = StateKeys {
            current: StateKeys::ephemeral().current,
            previous: Some(old.current),
        };
        assert!(
            rotated
                .answered(&state, &binding("t"), Reply::Always)
                .is_ok()
        );
        let expired = rotated.seal(&State {
            caller: "token:ab".into(),
            session: "stateless:token:ab".into(),
            tool: "t".into(),
            arguments: binding("t").arguments,
            expires: now() - 1,
            answers: Vec::new(),
            asking: "q".into(),
        });
        assert_eq!(
            rotated
                .answered(&expired, &binding("t"), Reply::Once)
                .unwrap_err(),
            Refused::Expired
        );
    }
}
