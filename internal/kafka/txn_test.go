package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The committed records of a partition, decided from its records and
// markers: what read_committed returns, also for a transaction a broker
// aborted at its restart without writing a marker.
func TestResolverCommitted(t *testing.T) {
	type in struct {
		offset int64
		pid    int64
		epoch  int16
		kind   string // data, plain (not transactional), commit, abort
	}
	for _, tc := range []struct {
		name string
		log  []in
		want string
	}{
		{"committed and aborted", []in{{0, 7, 0, "data"}, {1, 7, 0, "data"}, {2, 7, 0, "commit"}, {3, 7, 0, "data"}, {4, 7, 0, "abort"}, {5, 7, 0, "data"}, {6, 7, 0, "commit"}}, "0 1 5"},
		{"open at the end", []in{{0, 7, 0, "data"}, {1, 7, 0, "commit"}, {2, 7, 0, "data"}}, "0"},
		// kfake after a crash: T1 (epoch 0) has no marker, the next session
		// (epoch 1) commits; T1 must not ride on that commit.
		{"aborted without a marker", []in{{0, 7, 0, "data"}, {1, 7, 0, "data"}, {2, 7, 1, "data"}, {3, 7, 1, "commit"}}, "2"},
		// A fencing abort is written with the bumped epoch.
		{"abort with a higher epoch", []in{{0, 7, 3, "data"}, {1, 7, 4, "abort"}, {2, 7, 4, "data"}, {3, 7, 4, "commit"}}, "2"},
		{"producers apart, plain records at once", []in{{0, 7, 0, "data"}, {1, 8, 0, "data"}, {2, -1, -1, "plain"}, {3, 8, 0, "commit"}, {4, 7, 0, "abort"}}, "2 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			v := resolver{pending: map[int64][]*kgo.Record{}, committed: func(r *kgo.Record) { got = append(got, fmt.Sprint(r.Offset)) }}
			for _, e := range tc.log {
				k := recordKind{control: e.kind == "commit" || e.kind == "abort", commit: e.kind == "commit", transactional: e.kind != "plain"}
				v.add(k, &kgo.Record{Offset: e.offset, ProducerID: e.pid, ProducerEpoch: e.epoch})
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Fatalf("committed %q, want %q", s, tc.want)
			}
		})
	}
}
