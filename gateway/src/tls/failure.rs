//! Why a TLS handshake failed, as a short stable label for a metric.

use std::io;

use rustls::{AlertDescription, Error, PeerIncompatible};

/// Every label [`handshake_failure_reason`] returns (for registering metrics up front).
pub const HANDSHAKE_FAILURE_REASONS: [&str; 12] = [
    "protocol_version",
    "no_shared_cipher",
    "unknown_sni",
    "no_application_protocol",
    "bad_client_certificate",
    "client_certificate_required",
    "bad_message",
    "decode_error",
    "eof",
    "timeout",
    "io",
    "other",
];

/// Classifies an error of a server-side handshake (tokio-rustls `accept`, or a rustls error
/// wrapped in an `io::Error`); callers pass `ErrorKind::TimedOut` when the handshake timeout
/// expired. The result is one of [`HANDSHAKE_FAILURE_REASONS`]:
///
/// - `protocol_version`: the client offers no TLS version this listener accepts
/// - `no_shared_cipher`: no common cipher suite, key exchange group or signature scheme
/// - `unknown_sni`: no certificate for the client's SNI (or none sent) with `unknown_sni = "refuse"`
/// - `no_application_protocol`: the client offers ALPN protocols, none of the listener's
/// - `bad_client_certificate`: the client's certificate did not verify
/// - `client_certificate_required`: `client_auth` is required and the client sent none
/// - `bad_message`: a message out of order or otherwise against the protocol
/// - `decode_error`: bytes that are not TLS (e.g. plain HTTP on a TLS port)
/// - `eof`: the client closed the connection during the handshake
/// - `timeout`, `io`: the handshake timed out, or the socket failed
/// - `other`: anything else, including alerts the client sent
pub fn handshake_failure_reason(err: &io::Error) -> &'static str {
    if let Some(tls) = err.get_ref().and_then(|inner| inner.downcast_ref::<Error>()) {
        return rustls_reason(tls);
    }
    match err.kind() {
        io::ErrorKind::TimedOut => "timeout",
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => "eof",
        _ => "io",
    }
}

fn rustls_reason(err: &Error) -> &'static str {
    match err {
        Error::PeerIncompatible(incompatible) => match incompatible {
            PeerIncompatible::NoCipherSuitesInCommon
            | PeerIncompatible::NoKxGroupsInCommon
            | PeerIncompatible::NoSignatureSchemesInCommon
            | PeerIncompatible::NoEcPointFormatsInCommon => "no_shared_cipher",
            PeerIncompatible::Tls12NotOffered
            | PeerIncompatible::Tls12NotOfferedOrEnabled
            | PeerIncompatible::SupportedVersionsExtensionRequired
            | PeerIncompatible::ServerDoesNotSupportTls12Or13
            // A ClientHello without signature_algorithms is what TLS 1.0/1.1 clients send
            // (the extension exists from TLS 1.2 on).
            | PeerIncompatible::SignatureAlgorithmsExtensionRequired => "protocol_version",
            _ => "other",
        },
        // The only `None` our certificate resolver returns: no certificate for the SNI.
        Error::General(message) if message == "no server certificate chain resolved" => "unknown_sni",
        Error::NoApplicationProtocol => "no_application_protocol",
        Error::InvalidCertificate(_) => "bad_client_certificate",
        Error::NoCertificatesPresented => "client_certificate_required",
        Error::InvalidMessage(_) => "decode_error",
        Error::InappropriateMessage { .. }
        | Error::InappropriateHandshakeMessage { .. }
        | Error::PeerMisbehaved(_)
        | Error::PeerSentOversizedRecord
        | Error::DecryptError => "bad_message",
        Error::AlertReceived(AlertDescription::ProtocolVersion) => "protocol_version",
        _ => "other",
    }
}
