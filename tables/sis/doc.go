// Package sis is the codec for SIS XML, the message format the AODB writes
// into the legacy inbox CMINMSGS and reads from the outbox COUTMSGS.
//
// [Decode] turns one raw inbox message into a [Message]: the META header plus
// one typed payload chosen by META/TYPE (a schedule package, a flight
// operation, reference data records, a seasonal schedule, an outbound request
// echoed back, or a generic node tree for types the gateway only passes by).
// Failures are [*DecodeError] values classified MALFORMED (the message itself
// is broken; never retried) or CODEC_ERROR (well-formed but not decodable by
// this version; DEAD at once and replayable after a codec fix), see
// docs/design.md#outcomes. [DecodeHead] decodes the META header alone and
// [Head.Decode] the payload, so that the router can match its ignore rules
// before the payload is decoded.
//
// The time checks of the decoded records ([FlightRecord.CheckTimes],
// [Season.CheckTimes]) are not part of Decode: the router runs them on what
// it is about to apply (docs/design.md#time-values).
//
// The package does no I/O. Decoding is bounded in memory and time: input size,
// element depth, element count and attribute count are capped.
package sis
