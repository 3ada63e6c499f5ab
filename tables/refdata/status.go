package refdata

import (
	"fmt"
	"strings"
	"time"
)

// SISTimeLayout is the assumed layout of the RSTA window tags STRT and ENDT:
// SIS ddMMMyyHHmm in airport local time, e.g. "14MAR211023". Month names
// parse case-insensitively, so SIS's upper-case "MAR" is accepted.
const SISTimeLayout = "02Jan061504"

// ParseSISTime parses s (SISTimeLayout) as a wall-clock time in loc, the
// airport time zone (MSGX_AIRPORT_TZ). A nil loc means UTC. The two-digit year
// is always 20yy, as in the SIS codec (Go alone would read 69–99 as 19yy).
func ParseSISTime(s string, loc *time.Location) (time.Time, error) {
	if loc == nil {
		loc = time.UTC
	}
	t, err := time.ParseInLocation(SISTimeLayout, strings.TrimSpace(s), loc)
	if err == nil && t.Year() < 2000 {
		t = t.AddDate(100, 0, 0)
	}
	return t, err
}

// StatusAt returns the status of a resource at instant at, given its RSTA
// entry (the zero Entry for a resource without one) and the airport time zone
// in which STRT/ENDT are read (nil means UTC).
//
// A resource is available (E) by default. STAT D without a window disables it
// until a new event; with a window it is disabled only within [STRT, ENDT) —
// a missing STRT means "from the event on", a missing ENDT "until a new
// event" — and automatically available again from ENDT. STAT E ignores any
// window. An empty STRT/ENDT counts as missing (an empty tag is unavailable).
//
// until is the instant at which the returned status changes by itself (the
// window start or end), or nil if it holds until the next event. The
// function is pure: "now" is the argument, so a test's fake clock is just a
// time value.
func StatusAt(e Entry, at time.Time, loc *time.Location) (status string, until *time.Time) {
	if stat, _ := text(e.Attrs[TagSTAT]); stat != StatusDisabled {
		return StatusEnabled, nil
	}
	// Apply has validated the window, so an unparsable time cannot be stored;
	// should one be there anyway, it is treated as missing.
	start, hasStart := windowTime(e.Attrs, TagSTRT, loc)
	end, hasEnd := windowTime(e.Attrs, TagENDT, loc)
	switch {
	case hasStart && at.Before(start):
		return StatusEnabled, &start
	case hasEnd && !at.Before(end):
		return StatusEnabled, nil
	case hasEnd:
		return StatusDisabled, &end
	}
	return StatusDisabled, nil
}

// windowTime reads an optional window tag of an RSTA record.
func windowTime(rec Record, tag string, loc *time.Location) (time.Time, bool) {
	s, _ := text(rec[tag])
	if s == "" {
		return time.Time{}, false
	}
	t, err := ParseSISTime(s, loc)
	return t, err == nil
}

// checkStatus validates the non-key part of an RSTA record: STAT E or D, and
// window times that parse and do not end before they start. Validation here
// needs no time zone: the layout and the order of two wall-clock times of the
// same zone do not depend on it (Asia/Shanghai has no DST).
func checkStatus(rec Record) *RecordError {
	stat, _ := text(rec[TagSTAT])
	if stat != StatusEnabled && stat != StatusDisabled {
		return &RecordError{RType: RSTA, Tag: TagSTAT, Reason: ReasonBadValue,
			Detail: fmt.Sprintf("STAT %q is not %s or %s", stat, StatusEnabled, StatusDisabled)}
	}
	var bounds [2]*time.Time
	for i, tag := range []string{TagSTRT, TagENDT} {
		s, _ := text(rec[tag])
		if s == "" {
			continue
		}
		t, err := ParseSISTime(s, time.UTC)
		if err != nil {
			return &RecordError{RType: RSTA, Tag: tag, Reason: ReasonBadTime,
				Detail: fmt.Sprintf("%s %q is not SIS time ddMMMyyHHmm", tag, s)}
		}
		bounds[i] = &t
	}
	if bounds[0] != nil && bounds[1] != nil && !bounds[1].After(*bounds[0]) {
		return &RecordError{RType: RSTA, Tag: TagENDT, Reason: ReasonBadValue,
			Detail: "ENDT is not after STRT"}
	}
	return nil
}
