//! Session tickets sealed with keys from files (`listeners.tls.session_ticket_keys`), so that
//! every process reading the same files resumes the sessions of the others: the successor of a
//! binary upgrade, a restarted gateway, the other hosts behind one address. nginx's
//! `ssl_session_ticket_key` and HAProxy's `tls-ticket-keys` do the same; the file formats are
//! theirs (48 or 80 random bytes, e.g. `openssl rand 80`).
//!
//! Each file's bytes are the input of HKDF-SHA256, which gives the key's public name (16
//! bytes, put in front of each ticket, so that the key to open it is found without trying
//! them all) and its AES-256-GCM-SIV key: nothing of the file itself is ever sent. A ticket is
//! `name || nonce (12, random) || AES-256-GCM-SIV(issued-at (8 bytes, Unix seconds) || session)`,
//! the name authenticated as associated data. GCM-SIV because a key file may seal tickets for
//! months: plain GCM with random nonces is good for about 2^32 of them per key (five days at
//! 10,000 new sessions a second) before a repeated nonce would expose the key's authenticator;
//! a repeated nonce under GCM-SIV only shows that two sealed tickets were the same. The first
//! key seals; every key opens. A ticket older than [`LIFETIME`] is refused, whatever its key
//! (rustls leaves a ticket's age to the ticketer; its own rotates keys every 6 hours and forgets
//! them after 12).

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM_SIV, NONCE_LEN};
use aws_lc_rs::hkdf::{KeyType, Salt, HKDF_SHA256};
use rustls::server::ProducesTickets;

/// How long a ticket is good for, and the lifetime announced with it (seconds).
pub const LIFETIME: u32 = 6 * 3600;

/// The file sizes accepted: nginx's two formats.
pub const FILE_SIZES: [usize; 2] = [48, 80];

const NAME_LEN: usize = 16;
const TAG_LEN: usize = 16;
const ISSUED_LEN: usize = 8;
/// A clock step back this large still lets a ticket issued "in the future" be opened.
const CLOCK_SKEW_SECS: u64 = 60;

/// One key: its public name and its sealing key.
struct TicketKey {
    name: [u8; NAME_LEN],
    key: LessSafeKey,
}

/// Seals with the first key, opens with any.
pub struct FileTicketer {
    keys: Vec<TicketKey>,
}

impl fmt::Debug for FileTicketer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names only: never the keys.
        let names: Vec<String> = self.keys.iter().map(|k| hex(&k.name)).collect();
        f.debug_struct("FileTicketer").field("names", &names).finish()
    }
}

impl FileTicketer {
    /// From the bytes of each key file, in order (the first seals). An error names what is
    /// wrong with the bytes; the caller names the file.
    pub fn new(files: &[Vec<u8>]) -> Result<Self, (usize, String)> {
        let mut keys = Vec::with_capacity(files.len());
        for (i, bytes) in files.iter().enumerate() {
            if !FILE_SIZES.contains(&bytes.len()) {
                return Err((
                    i,
                    format!(
                        "a session ticket key file holds 48 or 80 random bytes (e.g. `openssl rand 80 > FILE`), not {}",
                        bytes.len()
                    ),
                ));
            }
            let prk = Salt::new(HKDF_SHA256, b"gateway session ticket key").extract(bytes);
            let mut name = [0u8; NAME_LEN];
            prk.expand(&[b"name"], Len(NAME_LEN))
                .and_then(|okm| okm.fill(&mut name))
                .map_err(|_| (i, "cannot derive the key's name".to_owned()))?;
            let okm = prk
                .expand(&[b"aes-256-gcm-siv"], &AES_256_GCM_SIV)
                .map_err(|_| (i, "cannot derive the key".to_owned()))?;
            let key = LessSafeKey::new(UnboundKey::from(okm));
            if keys.iter().any(|k: &TicketKey| k.name == name) {
                return Err((i, "the same key as an earlier file".to_owned()));
            }
            keys.push(TicketKey { name, key });
        }
        if keys.is_empty() {
            return Err((0, "no key file".to_owned()));
        }
        Ok(Self { keys })
    }

    fn seal_at(&self, plain: &[u8], now: u64) -> Option<Vec<u8>> {
        let key = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).ok()?;
        let mut ticket = Vec::with_capacity(NAME_LEN + NONCE_LEN + ISSUED_LEN + plain.len() + TAG_LEN);
        ticket.extend_from_slice(&key.name);
        ticket.extend_from_slice(&nonce);
        let mut sealed = Vec::with_capacity(ISSUED_LEN + plain.len() + TAG_LEN);
        sealed.extend_from_slice(&now.to_be_bytes());
        sealed.extend_from_slice(plain);
        key.key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(key.name), &mut sealed).ok()?;
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn open_at(&self, ticket: &[u8], now: u64) -> Option<Vec<u8>> {
        let name = ticket.get(..NAME_LEN)?;
        let nonce: [u8; NONCE_LEN] = ticket.get(NAME_LEN..NAME_LEN + NONCE_LEN)?.try_into().ok()?;
        let sealed = ticket.get(NAME_LEN + NONCE_LEN..)?;
        if sealed.len() < ISSUED_LEN + TAG_LEN {
            return None;
        }
        let key = self.keys.iter().find(|k| k.name == name)?;
        let mut buf = sealed.to_vec();
        let plain = key.key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(key.name), &mut buf).ok()?;
        let issued = u64::from_be_bytes(plain.get(..ISSUED_LEN)?.try_into().ok()?);
        if issued > now.saturating_add(CLOCK_SKEW_SECS) || now.saturating_sub(issued) > u64::from(LIFETIME) {
            return None;
        }
        Some(plain.get(ISSUED_LEN..)?.to_vec())
    }
}

impl ProducesTickets for FileTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal_at(plain, unix_now())
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open_at(cipher, unix_now())
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An HKDF output length.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_mul(31).wrapping_add(i as u8)).collect()
    }

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn a_ticket_opens_with_any_process_holding_the_key_and_with_no_other() {
        let a = FileTicketer::new(&[file(1, 80)]).unwrap();
        let same = FileTicketer::new(&[file(1, 80)]).unwrap();
        let other = FileTicketer::new(&[file(2, 80)]).unwrap();
        let ticket = a.seal_at(b"session state", NOW).unwrap();
        assert_eq!(same.open_at(&ticket, NOW + 5).as_deref(), Some(&b"session state"[..]));
        assert_eq!(other.open_at(&ticket, NOW), None);
        // Nothing of the key file is in the ticket, and two tickets of one session differ.
        let f = file(1, 80);
        assert!(!ticket.windows(8).any(|w| f.windows(8).any(|x| x == w)));
        assert_ne!(a.seal_at(b"session state", NOW).unwrap(), ticket);
    }

    #[test]
    fn the_first_key_seals_and_the_others_still_open() {
        let old = FileTicketer::new(&[file(1, 48)]).unwrap();
        let rotated = FileTicketer::new(&[file(2, 80), file(1, 48)]).unwrap();
        let before = old.seal_at(b"before", NOW).unwrap();
        assert_eq!(rotated.open_at(&before, NOW).as_deref(), Some(&b"before"[..]));
        let after = rotated.seal_at(b"after", NOW).unwrap();
        assert_eq!(old.open_at(&after, NOW), None, "sealed with the new key");
        assert_eq!(FileTicketer::new(&[file(2, 80)]).unwrap().open_at(&after, NOW).as_deref(), Some(&b"after"[..]));
    }

    #[test]
    fn old_tampered_or_short_tickets_are_refused() {
        let t = FileTicketer::new(&[file(3, 80)]).unwrap();
        let ticket = t.seal_at(b"x", NOW).unwrap();
        assert!(t.open_at(&ticket, NOW + u64::from(LIFETIME)).is_some());
        assert_eq!(t.open_at(&ticket, NOW + u64::from(LIFETIME) + 1), None, "too old");
        assert_eq!(t.open_at(&ticket, NOW - CLOCK_SKEW_SECS - 1), None, "from the future");
        for i in 0..ticket.len() {
            let mut bad = ticket.clone();
            bad[i] ^= 0x40;
            assert_eq!(t.open_at(&bad, NOW), None, "byte {i} flipped");
        }
        for n in 0..ticket.len() {
            assert_eq!(t.open_at(&ticket[..n], NOW), None, "cut to {n} bytes");
        }
        assert_eq!(t.open_at(&[], NOW), None);
    }

    #[test]
    fn key_files_of_the_wrong_size_or_repeated_are_refused() {
        let e = FileTicketer::new(&[file(1, 80), file(2, 32)]).unwrap_err();
        assert_eq!(e.0, 1);
        assert!(e.1.contains("48 or 80"), "{}", e.1);
        assert_eq!(FileTicketer::new(&[file(1, 80), file(1, 80)]).unwrap_err().0, 1);
        assert!(FileTicketer::new(&[]).is_err());
        assert!(!format!("{:?}", FileTicketer::new(&[file(1, 80)]).unwrap()).contains(&format!("{:?}", file(1, 80))));
    }
}
