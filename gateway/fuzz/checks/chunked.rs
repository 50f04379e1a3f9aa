//! `ChunkedDecoder` on arbitrary bytes split at a fuzzer-chosen point: never panics, never
//! consumes more than it was given, stops short only at the end of the message, and decodes the
//! same (output, consumed bytes, error) in one call as in two.

use gateway::codec::chunked::{ChunkedDecoder, ChunkedError};

/// Total bytes consumed, whether the message ended, or the error.
type Outcome = Result<(usize, bool), ChunkedError>;

fn feed(decoder: &mut ChunkedDecoder, input: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool), ChunkedError> {
    let p = decoder.decode(input, out)?;
    assert!(p.consumed <= input.len(), "consumed {} of {}", p.consumed, input.len());
    assert!(p.done || p.consumed == input.len(), "stopped at {} of {} before the end", p.consumed, input.len());
    assert_eq!(p.done, decoder.is_done());
    Ok((p.consumed, p.done))
}

/// The check run on each input (by the fuzz target and by `gateway/tests/fuzz_inputs.rs`).
pub fn check(data: &[u8]) {
    let Some((&split, input)) = data.split_first() else { return };
    let at = usize::from(split) * input.len() / 255;
    let (a, b) = input.split_at(at);

    let mut whole_out = Vec::new();
    let whole: Outcome = feed(&mut ChunkedDecoder::new(), input, &mut whole_out);

    let mut split_out = Vec::new();
    let mut decoder = ChunkedDecoder::new();
    let split: Outcome = feed(&mut decoder, a, &mut split_out).and_then(|(n, done)| {
        if done {
            // A finished decoder takes nothing more.
            assert_eq!(feed(&mut decoder, b, &mut split_out), Ok((0, true)));
            Ok((n, true))
        } else {
            feed(&mut decoder, b, &mut split_out).map(|(m, done)| (n + m, done))
        }
    });
    assert_eq!(whole, split, "split at {at}");
    assert_eq!(whole_out, split_out, "split at {at}");
    assert!(whole_out.len() <= input.len());
}
