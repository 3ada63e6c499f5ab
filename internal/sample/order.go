package sample

import (
	"fmt"
	"regexp"
)

// Creating is a schedule download that creates the two flights the FLOP
// samples name but no sample creates (121112312 and 7610151).
var Creating = Sample{File: "created-for-the-samples", Label: "DNLD", XML: `<?xml version="1.0" encoding="UTF-8"?><MSG><META>` +
	`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20180810080000</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META><SCHD><RECS>2</RECS>` +
	`<FLTR><FLID>121112312</FLID><ALCD>CA</ALCD><FLNO>CA101</FLNO><SODT>10AUG181850</SODT></FLTR>` +
	`<FLTR><FLID>7610151</FLID><ALCD>CA</ALCD><FLNO>CA9001</FLNO><SODT>15DEC201200</SODT></FLTR></SCHD></MSG>`}

// Ordered is the samples in an order that applies each of them: the SCHD
// sample's download first (it creates flights 15 and 16), then Creating,
// then every other sample in file order, except the FDEL (of flight 15),
// which comes last so that the FLOPs on 15 find the flight live.
func Ordered(samples []Sample) []Sample {
	var first, rest, last []Sample
	for _, s := range samples {
		switch {
		case s.File == "INSERT_CMINMSGS_SCHD.sql" && s.Index == 0:
			first = append(first, s)
		case s.File == "INSERT_CMINMSGS_FDEL.sql":
			last = append(last, s)
		default:
			rest = append(rest, s)
		}
	}
	return append(append(append(first, Creating), rest...), last...)
}

var seqnTag = regexp.MustCompile(`<SEQN>[^<]*</SEQN>`)

// Renumbered is xml with its SEQN replaced by seqn. The samples share SEQNs
// (several are 1243): sent as they are, every message after the first of
// one SNDR|TYPE|STYP|SEQN is SKIPPED as a duplicate of it.
func Renumbered(xml string, seqn int64) string {
	return seqnTag.ReplaceAllString(xml, fmt.Sprintf("<SEQN>%d</SEQN>", seqn))
}
