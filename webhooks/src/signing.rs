//! Standard Webhooks 1.0 signatures: a secret is `whsec_` and the base64 of its key bytes; a
//! message is signed as HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`, sent as
//! `v1,` and the base64 of the MAC; during a rotation's overlap every live secret signs, the
//! signatures separated by spaces, and a receiver accepts any one it can verify.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use store::SigningSecret;

const PREFIX: &str = "whsec_";
/// Key bytes of a new secret (the spec asks for 24 to 64).
const KEY_BYTES: usize = 32;

/// A new random secret.
pub fn new_secret() -> String {
    let mut key = [0u8; KEY_BYTES];
    rand::rng().fill_bytes(&mut key);
    format!("{PREFIX}{}", STANDARD.encode(key))
}

/// The signature of one message with one secret (`v1,…`); `None` for a secret that is not
/// ours (it never is: they are made by [`new_secret`]).
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix(PREFIX)?).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The `webhook-signature` header's value: a signature by every secret live at `now`.
pub fn signature_header(
    secrets: &[SigningSecret],
    now: DateTime<Utc>,
    id: &str,
    timestamp: i64,
    body: &str,
) -> String {
    secrets
        .iter()
        .filter(|s| s.expires_at.is_none_or(|t| t > now))
        .filter_map(|s| sign(&s.secret, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's test vectors.
    #[test]
    fn signs_as_the_specification_s_example() {
        let signature = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(
            signature.as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn every_live_secret_signs_during_a_rotation() {
        let now = Utc::now();
        let secret = |expires_at| SigningSecret {
            secret: new_secret(),
            created_at: now,
            expires_at,
        };
        let secrets = [
            secret(None),
            secret(Some(now + chrono::Duration::hours(1))),
            secret(Some(now - chrono::Duration::seconds(1))),
        ];
        let header = signature_header(&secrets, now, "msg_1", 1, "{}");
        assert_eq!(header.split(' ').count(), 2, "{header}");
        assert!(header.split(' ').all(|s| s.starts_with("v1,")));
    }
}
