package sample

import (
	"strings"
	"testing"
)

// TestLoadAll checks that every message of the sample files is found and
// looks like XML.
func TestLoadAll(t *testing.T) {
	samples, err := Load(Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 172 {
		t.Fatalf("loaded %d samples, want 172", len(samples))
	}
	for _, s := range samples {
		if !strings.HasPrefix(s.XML, "<?xml") && !strings.HasPrefix(s.XML, "<MSG") {
			t.Errorf("%s: XML starts with %.20q", s.Name(), s.XML)
		}
		if s.Label == "" {
			t.Errorf("%s: no label", s.Name())
		}
	}
	first := samples[0]
	if first.File != "INSERT_CMINMSGS_ABDG.sql" || first.Index != 0 || first.Label != "DNLD" {
		t.Errorf("first sample = %s", first.Name())
	}
}

// TestParse covers the SQL scanning rules on small scripts.
func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		sql    string
		labels []string
		xmls   []string
	}{
		{
			name:   "doubled quote",
			sql:    "-- UPD\nINSERT INTO cminmsgs (A, B) VALUES ('<MSG a=''x''/>', 'VALID');",
			labels: []string{"UPD"},
			xmls:   []string{"<MSG a='x'/>"},
		},
		{
			name:   "backslash escapes",
			sql:    `INSERT INTO db.CMINMSGS VALUES ('a\'b\"c\\d\ne\tf\%g\_h\qi', 1);`,
			labels: []string{""},
			xmls:   []string{"a'b\"c\\d\ne\tf\\%g\\_hqi"},
		},
		{
			name:   "comment without space, quoted table, two tuples",
			sql:    "--Delete\nINSERT INTO `db`.`cminmsgs` VALUES ('x', 'y'), (\"z\", 'w');",
			labels: []string{"Delete", "Delete"},
			xmls:   []string{"x", "z"},
		},
		{
			name:   "other tables and statements are skipped",
			sql:    "-- Create table\nCREATE TABLE `cminmsgs` (`ID` bigint);\nINSERT INTO coutmsgs VALUES ('no');\n-- DNLD\nINSERT INTO cminmsgs VALUES ('yes; (really)');",
			labels: []string{"DNLD"},
			xmls:   []string{"yes; (really)"},
		},
		{
			name:   "comment inside statement does not become the label",
			sql:    "-- ADD\nINSERT INTO cminmsgs\n-- not a label\nVALUES ('m');",
			labels: []string{"ADD"},
			xmls:   []string{"m"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("t.sql", tc.sql)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.xmls) {
				t.Fatalf("got %d samples, want %d: %+v", len(got), len(tc.xmls), got)
			}
			for i, s := range got {
				if s.XML != tc.xmls[i] || s.Label != tc.labels[i] || s.Index != i || s.File != "t.sql" {
					t.Errorf("sample %d = %+v, want label %q xml %q", i, s, tc.labels[i], tc.xmls[i])
				}
			}
		})
	}
}

// TestParseErrors checks that broken scripts are reported, not truncated.
func TestParseErrors(t *testing.T) {
	tests := []struct{ name, sql, want string }{
		{"unterminated string", "INSERT INTO cminmsgs VALUES ('abc", "unterminated string literal"},
		{"dangling backslash", "INSERT INTO cminmsgs VALUES ('abc\\", "unterminated string literal"},
		{"unterminated comment", "/* x", "unterminated /* comment"},
		{"unbalanced", "INSERT INTO cminmsgs VALUES ('a'", "unbalanced parentheses"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.sql", tc.sql)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLoadNoDir checks the error for a missing directory.
func TestLoadNoDir(t *testing.T) {
	if _, err := Load(""); err == nil {
		t.Fatal("Load(\"\") succeeded")
	}
}

// Ordered starts with the flights the others change and ends with the
// FDEL; Renumbered gives a message its own SEQN.
func TestOrderedAndRenumbered(t *testing.T) {
	samples, err := Load(Dir())
	if err != nil {
		t.Fatal(err)
	}
	o := Ordered(samples)
	if len(o) != len(samples)+1 || o[0].Name() != "INSERT_CMINMSGS_SCHD.sql#0(DNLD)" || o[1].File != Creating.File ||
		o[len(o)-1].File != "INSERT_CMINMSGS_FDEL.sql" {
		t.Fatalf("order: %s, %s, …, %s (%d)", o[0].Name(), o[1].Name(), o[len(o)-1].Name(), len(o))
	}
	got := Renumbered("<MSG><META><SEQN>1243</SEQN></META></MSG>", 700001)
	if got != "<MSG><META><SEQN>700001</SEQN></META></MSG>" {
		t.Errorf("Renumbered: %s", got)
	}
}
