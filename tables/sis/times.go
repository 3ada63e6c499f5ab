package sis

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Go layouts of the SIS time formats. time.Format with TimeLayout or
// DateLayout writes a mixed-case month ("Jan"); use FormatTime for SIS
// output, and ParseTime / ParseDate, which also check the ranges, for input.
const (
	// TimeLayout is the SIS date-time format ddMMMyyHHmm, e.g. 23JAN210535.
	TimeLayout = "02Jan061504"
	// DateLayout is the SIS date format ddMMMyy, e.g. 23JAN21.
	DateLayout = "02Jan06"
	// DTTMLayout is the META/DTTM format yyyyMMddHHmmss.
	DTTMLayout = "20060102150405"
)

var (
	// ErrTimeFormat is wrapped by the time parsers when the text does not
	// have the expected shape.
	ErrTimeFormat = errors.New("unknown date format")
	// ErrTimeRange is wrapped by the time parsers when the text has the
	// right shape but names an impossible date or time (32JAN21, 2460).
	ErrTimeRange = errors.New("date or time out of range")
)

var months = [12]string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}

// DefaultLocation returns Asia/Shanghai, the default airport time zone. When
// the tz database is not available it returns a fixed UTC+8 zone, which is
// exact for Shanghai since 1991 (no daylight saving time).
func DefaultLocation() *time.Location {
	return defaultLocation()
}

// defaultLocation loads the zone once: LoadLocation reads the tz database.
var defaultLocation = sync.OnceValue(func() *time.Location {
	if loc, err := time.LoadLocation("Asia/Shanghai"); err == nil {
		return loc
	}
	return time.FixedZone("CST", 8*3600)
})

// ParseTime parses a SIS date-time ddMMMyyHHmm (e.g. "23JAN210535" is
// 2021-01-23 05:35) in loc. The month name is case-insensitive; the year is
// 20yy; surrounding XML whitespace is ignored. A nil loc means
// DefaultLocation().
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	v := trimXMLSpace(s)
	if len(v) != 11 {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
	}
	y, m, d, err := parseDMY(v[:7])
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), err)
	}
	hh, ok1 := digits(v[7:9])
	mm, ok2 := digits(v[9:11])
	if !ok1 || !ok2 {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
	}
	if hh > 23 || mm > 59 {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), ErrTimeRange)
	}
	return time.Date(y, m, d, hh, mm, 0, 0, orDefault(loc)), nil
}

// ParseDate parses a SIS date ddMMMyy (e.g. "23JAN21") as midnight in loc,
// with the same rules as ParseTime.
func ParseDate(s string, loc *time.Location) (time.Time, error) {
	v := trimXMLSpace(s)
	if len(v) != 7 {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
	}
	y, m, d, err := parseDMY(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), err)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, orDefault(loc)), nil
}

// ParseDTTM parses META/DTTM, yyyyMMddHHmmss (e.g. "20181105223126"), in loc.
func ParseDTTM(s string, loc *time.Location) (time.Time, error) {
	v := trimXMLSpace(s)
	if len(v) != 14 {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
	}
	// yyyy MM dd HH mm ss
	var n [6]int
	widths := [6]int{4, 2, 2, 2, 2, 2}
	for i, off := 0, 0; i < len(n); i++ {
		x, ok := digits(v[off : off+widths[i]])
		if !ok {
			return time.Time{}, fmt.Errorf("%q: %w", short(s), ErrTimeFormat)
		}
		n[i] = x
		off += widths[i]
	}
	if n[1] < 1 || n[1] > 12 || n[2] < 1 || n[2] > daysIn(time.Month(n[1]), n[0]) ||
		n[3] > 23 || n[4] > 59 || n[5] > 59 {
		return time.Time{}, fmt.Errorf("%q: %w", short(s), ErrTimeRange)
	}
	return time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], 0, orDefault(loc)), nil
}

// FormatTime formats t in its own location as SIS ddMMMyyHHmm with an
// upper-case month, e.g. "23JAN210535".
func FormatTime(t time.Time) string {
	return fmt.Sprintf("%02d%s%02d%02d%02d", t.Day(), months[t.Month()-1], t.Year()%100, t.Hour(), t.Minute())
}

// FormatDTTM formats t in its own location as yyyyMMddHHmmss.
func FormatDTTM(t time.Time) string {
	return t.Format(DTTMLayout)
}

// parseDMY parses ddMMMyy.
func parseDMY(v string) (int, time.Month, int, error) {
	d, ok1 := digits(v[0:2])
	yy, ok2 := digits(v[5:7])
	if !ok1 || !ok2 {
		return 0, 0, 0, ErrTimeFormat
	}
	m := time.Month(0)
	for i, name := range months {
		if strings.EqualFold(v[2:5], name) {
			m = time.Month(i + 1)
			break
		}
	}
	if m == 0 {
		return 0, 0, 0, ErrTimeFormat
	}
	y := 2000 + yy
	if d < 1 || d > daysIn(m, y) {
		return 0, 0, 0, ErrTimeRange
	}
	return y, m, d, nil
}

// digits parses a string of ASCII digits only (no sign, no spaces).
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, len(s) > 0
}

// daysIn returns the number of days of month m in year y.
func daysIn(m time.Month, y int) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func orDefault(loc *time.Location) *time.Location {
	if loc == nil {
		return DefaultLocation()
	}
	return loc
}
