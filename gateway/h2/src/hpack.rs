//! HPACK (RFC 7541): the decoder of request header blocks and the encoder of response heads.
