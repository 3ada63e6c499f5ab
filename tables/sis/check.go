package sis

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"msgx/tables/flight"
)

// timeFormat is the SIS format of a time-valued tag. Every format is one the
// AODB's samples use (docs/design.md#time-values: a time in any other shape
// is a CODEC_ERROR, never stored or published).
type timeFormat int

const (
	// formatDateTime is ddMMMyyHHmm (ParseTime), e.g. 23JAN210535.
	formatDateTime timeFormat = iota
	// formatDate is ddMMMyy (ParseDate), e.g. 10SEP20.
	formatDate
	// formatClock is HHmm, a time of day (seasonal routes and SCHT), e.g. 1330.
	formatClock
	// formatDayOffset is a signed day count, e.g. +1 or -2 (SADC, SDDC).
	formatDayOffset
)

// check parses v in format f; v is never empty here.
func (f timeFormat) check(v string) error {
	var err error
	switch f {
	case formatDateTime:
		_, err = ParseTime(v, time.UTC)
	case formatDate:
		_, err = ParseDate(v, time.UTC)
	case formatClock:
		_, err = ParseClock(v)
	case formatDayOffset:
		err = parseDayOffset(v)
	}
	return err
}

// ParseClock parses a SIS time of day HHmm (e.g. "1330") as the duration
// since midnight; surrounding XML whitespace is ignored.
func ParseClock(s string) (time.Duration, error) {
	v := trimXMLSpace(s)
	if len(v) != 4 {
		return 0, fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
	}
	hh, ok1 := digits(v[:2])
	mm, ok2 := digits(v[2:])
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
	}
	if hh > 23 || mm > 59 {
		return 0, fmt.Errorf("%q: %w", short(s), ErrTimeRange)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}

// parseDayOffset accepts an optionally signed day count of one or two
// digits ("+1", "-2", "0").
func parseDayOffset(s string) error {
	v := trimXMLSpace(s)
	if len(v) > 0 && (v[0] == '+' || v[0] == '-') {
		v = v[1:]
	}
	if _, ok := digits(v); !ok || len(v) > 2 {
		return fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
	}
	return nil
}

// flightTimes is flight.TimeScalars as a format map.
var flightTimes = func() map[string]timeFormat {
	m := make(map[string]timeFormat, len(flight.TimeScalars))
	for _, tag := range flight.TimeScalars {
		m[tag] = formatDateTime
	}
	return m
}()

// collectionTimes is CollectionSpec.Times of every collection as format maps.
var collectionTimes = func() map[string]map[string]timeFormat {
	out := make(map[string]map[string]timeFormat, len(flight.Collections))
	for _, c := range flight.Collections {
		m := make(map[string]timeFormat, len(c.Times))
		for _, k := range c.Times {
			m[k] = formatDateTime
		}
		out[c.Name] = m
	}
	return out
}()

// CheckTimes checks every time-valued tag the record carries: the scalars of
// flight.TimeScalars and, in each element of a collection, its
// CollectionSpec.Times, all ddMMMyyHHmm. An empty value passes (it clears).
// The error names the first offending tag and value (scalars by name, then
// the collections in vocabulary order), e.g. `GTDT[2]/PGOT "1805": unknown
// date format`, and wraps ErrTimeFormat or ErrTimeRange; the router makes it
// a CODEC_ERROR.
//
// It is not part of Decode: the router checks the records it is about to
// apply, after the ignore rules and the unsupported check, so that a message
// it would skip anyway is skipped whatever it carries.
func (r *FlightRecord) CheckTimes() error {
	if err := checkFields("", r.Fields, flightTimes); err != nil {
		return err
	}
	for _, c := range flight.Collections {
		for i, e := range r.Collections[c.Name] {
			if err := checkFields(fmt.Sprintf("%s[%d]/", c.Name, i+1), e, collectionTimes[c.Name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFields checks the keys of fields that formats names, in key order.
// path prefixes the tag in the reason.
func checkFields(path string, fields map[string]string, formats map[string]timeFormat) error {
	if len(formats) == 0 {
		return nil
	}
	for _, k := range sortedKeys(fields) {
		f, ok := formats[k]
		if !ok || fields[k] == "" {
			continue
		}
		if err := f.check(fields[k]); err != nil {
			return fmt.Errorf("%s%s %w", path, k, err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
