package sis

import (
	"errors"
	"testing"
	"time"
)

// TestParseTime covers the SIS ddMMMyyHHmm format.
func TestParseTime(t *testing.T) {
	loc := shanghai(t)
	tests := []struct {
		in      string
		want    time.Time
		wantErr error
	}{
		{"23JAN210535", time.Date(2021, 1, 23, 5, 35, 0, 0, loc), nil},
		{"23jan210535", time.Date(2021, 1, 23, 5, 35, 0, 0, loc), nil},
		{"01Dec992359", time.Date(2099, 12, 1, 23, 59, 0, 0, loc), nil},
		{" 15DEC031805\n", time.Date(2003, 12, 15, 18, 5, 0, 0, loc), nil},
		{"29FEB240000", time.Date(2024, 2, 29, 0, 0, 0, 0, loc), nil},
		{"29FEB230000", time.Time{}, ErrTimeRange},
		{"31APR210000", time.Time{}, ErrTimeRange},
		{"00JAN210000", time.Time{}, ErrTimeRange},
		{"23JAN212400", time.Time{}, ErrTimeRange},
		{"23JAN210560", time.Time{}, ErrTimeRange},
		{"", time.Time{}, ErrTimeFormat},
		{"23JAN21053", time.Time{}, ErrTimeFormat},
		{"23JAN2105350", time.Time{}, ErrTimeFormat},
		{"23JUX210535", time.Time{}, ErrTimeFormat},
		{"2301210535x", time.Time{}, ErrTimeFormat},
		{"+3JAN210535", time.Time{}, ErrTimeFormat},
		{"23JAN21 535", time.Time{}, ErrTimeFormat},
		{"23ÄAN210535", time.Time{}, ErrTimeFormat},
		{"20210123053500", time.Time{}, ErrTimeFormat},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTime(tc.in, loc)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr != nil && err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !got.Equal(tc.want) || (err == nil && got.Location() != loc) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// nil means Asia/Shanghai.
	got, err := ParseTime("23JAN210535", nil)
	if err != nil || !got.Equal(time.Date(2021, 1, 22, 21, 35, 0, 0, time.UTC)) {
		t.Errorf("nil location: %v, %v", got, err)
	}
}

// TestParseDate covers the SIS ddMMMyy format.
func TestParseDate(t *testing.T) {
	loc := shanghai(t)
	tests := []struct {
		in      string
		want    time.Time
		wantErr error
	}{
		{"23JAN21", time.Date(2021, 1, 23, 0, 0, 0, 0, loc), nil},
		{"10sep20", time.Date(2020, 9, 10, 0, 0, 0, 0, loc), nil},
		{"30FEB21", time.Time{}, ErrTimeRange},
		{"23JAN2", time.Time{}, ErrTimeFormat},
		{"23JAN210535", time.Time{}, ErrTimeFormat},
		{"AAJAN21", time.Time{}, ErrTimeFormat},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDate(tc.in, loc)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr != nil && err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestParseDTTM covers the META/DTTM format.
func TestParseDTTM(t *testing.T) {
	loc := shanghai(t)
	tests := []struct {
		in      string
		want    time.Time
		wantErr error
	}{
		{"20181105223126", time.Date(2018, 11, 5, 22, 31, 26, 0, loc), nil},
		{"20240229000000", time.Date(2024, 2, 29, 0, 0, 0, 0, loc), nil},
		{"20230229000000", time.Time{}, ErrTimeRange},
		{"20181305223126", time.Time{}, ErrTimeRange},
		{"20181105243126", time.Time{}, ErrTimeRange},
		{"20181105226026", time.Time{}, ErrTimeRange},
		{"20181105223160", time.Time{}, ErrTimeRange},
		{"2006-12-10", time.Time{}, ErrTimeFormat},
		{"2018110522312", time.Time{}, ErrTimeFormat},
		{"2018-1105223126", time.Time{}, ErrTimeFormat},
		{"+0181105223126", time.Time{}, ErrTimeFormat},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDTTM(tc.in, loc)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr != nil && err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFormatTime checks the formatters against the parsers.
func TestFormatTime(t *testing.T) {
	loc := shanghai(t)
	tm := time.Date(2021, 1, 3, 5, 7, 9, 0, loc)
	if got := FormatTime(tm); got != "03JAN210507" {
		t.Errorf("FormatTime = %q", got)
	}
	if got := FormatDTTM(tm); got != "20210103050709" {
		t.Errorf("FormatDTTM = %q", got)
	}
	for m := time.January; m <= time.December; m++ {
		in := time.Date(2030, m, 28, 23, 59, 0, 0, loc)
		back, err := ParseTime(FormatTime(in), loc)
		if err != nil || !back.Equal(in) {
			t.Errorf("%v: round trip %v, %v", in, back, err)
		}
	}
}
