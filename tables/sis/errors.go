package sis

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Class is the error class of a decoding failure (docs/design.md#outcomes).
type Class string

const (
	// Malformed means the message is broken (not XML, no META, required
	// payload missing): it goes DEAD at once and is not replayable.
	Malformed Class = "MALFORMED"
	// CodecError means the message is well-formed but this codec version
	// cannot decode it (e.g. an unknown date format): it goes DEAD at once
	// (the same bytes through the same code cannot succeed) and is
	// replayable once the codec is fixed.
	CodecError Class = "CODEC_ERROR"
)

// DecodeError is the only error type Decode returns.
type DecodeError struct {
	// Class is Malformed or CodecError.
	Class Class
	// Reason is a short, precise and self-contained description, e.g.
	// `no META element` or `META/DTTM "2006-12-10": unknown date format`.
	Reason string
	// Err is the underlying error, if any (kept for errors.Is/As).
	Err error
}

// Error implements error as "<CLASS>: <reason>".
func (e *DecodeError) Error() string {
	return string(e.Class) + ": " + e.Reason
}

// Unwrap returns the underlying error.
func (e *DecodeError) Unwrap() error { return e.Err }

// ClassOf returns the Class of the *DecodeError in err's chain, or "" when
// err is nil or carries no *DecodeError.
func ClassOf(err error) Class {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Class
	}
	return ""
}

// Bounds of the text that a reason quotes from the message, so that a
// hostile message cannot make an error (and every log line carrying it) huge.
const (
	maxQuoted = 64
	maxReason = 256
)

// short cuts s to maxQuoted bytes (at a rune boundary), marking the cut.
func short(s string) string {
	return clip(s, maxQuoted)
}

// clip cuts s to at most n bytes at a rune boundary, ending with "…" when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// malformed builds a MALFORMED error with a formatted reason.
func malformed(format string, args ...any) *DecodeError {
	return &DecodeError{Class: Malformed, Reason: fmt.Sprintf(format, args...)}
}

// codecErr builds a CODEC_ERROR whose reason is prefix + " " + err, e.g.
// `META/DTTM "2006-12-10": unknown date format` (the time parsers' errors
// start with the quoted input).
func codecErr(prefix string, err error) *DecodeError {
	return &DecodeError{Class: CodecError, Reason: prefix + " " + err.Error(), Err: err}
}
