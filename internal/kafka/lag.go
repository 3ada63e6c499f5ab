package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Group is a consumer group and the input topics whose lag is read.
type Group struct {
	Group  string
	Topics []string
}

// GroupLag is one consumer group on one of its input topics. With several
// partitions the offsets are sums over them. `msgx status --json` prints it
// under "groups".
type GroupLag struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	// State is the group's state at the coordinator (Stable, Empty,
	// PreparingRebalance, Dead, …); Members its live members. A group with
	// no members is not consuming.
	State      string `json:"state"`
	Members    int    `json:"members"`
	Partitions int    `json:"partitions"`
	// Committed is the committed offset (the next record the group will
	// read); -1 when the group has never committed on this topic.
	// Partitions without a commit count at their log start, where the
	// group begins (Offsets.Initial = oldest).
	Committed int64 `json:"committed"`
	// End is the topic's end offset (high watermark).
	End int64 `json:"end"`
	// Lag is End − Committed: records not yet processed.
	Lag int64 `json:"lag"`
	// Error is why this row is incomplete (e.g. the topic does not exist).
	Error string `json:"error,omitempty"`
}

// Lags reads the lag of every group on each of its topics, one row per
// (group, topic) in the order given. A group that never committed on a
// partition counts from the partition's log start, where it will begin
// (consumers start at the oldest offset), not from offset 0: records
// removed by retention are not waiting for anyone.
//
// The error is for Kafka not answering at all (the client, the offset
// listings); a group or topic that could not be read fully gets its row
// with Error set. Every round trip is bounded by c.Timeout, and the first
// failed one stops the call, so an outage costs one timeout.
func Lags(ctx context.Context, c Config, brokers []string, groups []Group) ([]GroupLag, error) {
	if len(groups) == 0 {
		return []GroupLag{}, nil
	}
	timeout := c.Timeout
	cl, err := NewKgoClient(c, brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	kcall := func(fn func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return fn(ctx)
	}

	var topics, names []string
	for _, g := range groups {
		names = append(names, g.Group)
		for _, t := range g.Topics {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	var ends, starts kadm.ListedOffsets
	if err := kcall(func(ctx context.Context) (err error) { ends, err = adm.ListEndOffsets(ctx, topics...); return }); err != nil {
		return nil, fmt.Errorf("listing end offsets of %s (%s): %w", strings.Join(topics, ", "), c.Security(), err)
	}
	if err := kcall(func(ctx context.Context) (err error) { starts, err = adm.ListStartOffsets(ctx, topics...); return }); err != nil {
		return nil, fmt.Errorf("listing start offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	var described kadm.DescribedGroups
	var descErr error
	if err := kcall(func(ctx context.Context) (err error) { described, err = adm.DescribeGroups(ctx, names...); return }); err != nil {
		// Offsets still say how far behind the groups are.
		descErr = fmt.Errorf("describing groups: %w", err)
	}
	var fetched kadm.FetchOffsetsResponses
	_ = kcall(func(ctx context.Context) error { fetched = adm.FetchManyOffsets(ctx, names...); return nil })

	var out []GroupLag
	for _, g := range groups {
		var errs []string
		if descErr != nil {
			errs = append(errs, descErr.Error())
		}
		state, members := "", 0
		if d, ok := described[g.Group]; ok {
			state, members = d.State, len(d.Members)
			switch {
			case errors.Is(d.Err, kerr.GroupIDNotFound):
				// A group that never joined nor committed. Kafka describes
				// it as Dead without error; some brokers (kfake) answer
				// GROUP_ID_NOT_FOUND. Either way: nobody consumes.
				state = "Dead"
			case d.Err != nil:
				errs = append(errs, fmt.Sprintf("describing group: %v", d.Err))
			}
		}
		committed, ok := fetched[g.Group]
		switch {
		case !ok:
			errs = append(errs, "committed offsets not fetched")
		case errors.Is(committed.Err, kerr.GroupIDNotFound):
			// Never committed: the lag counts from the log start below.
		case committed.Err != nil:
			errs = append(errs, fmt.Sprintf("fetching committed offsets: %v", committed.Err))
		}
		for _, t := range g.Topics {
			row := GroupLag{Group: g.Group, Topic: t, State: state, Members: members, Committed: -1}
			rowErrs := append([]string(nil), errs...)
			parts := ends[t]
			if p, bad := parts[-1]; bad && p.Err != nil {
				rowErrs = append(rowErrs, fmt.Sprintf("topic %s: %v", t, p.Err))
				parts = nil
			}
			sumAt, anyCommitted := int64(0), false
			for p, end := range parts {
				if end.Err != nil {
					rowErrs = append(rowErrs, fmt.Sprintf("end offset of %s/%d: %v", t, p, end.Err))
					continue
				}
				row.Partitions++
				row.End += end.Offset
				var at int64
				if c, ok := committed.Fetched.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
					at, anyCommitted = c.At, true
				} else if st, ok := starts.Lookup(t, p); ok && st.Err == nil {
					// Never committed here: the group starts at the oldest
					// offset, so everything still in the log is its lag.
					at = st.Offset
				}
				sumAt += at
				row.Lag += max(0, end.Offset-at)
			}
			if anyCommitted {
				row.Committed = sumAt
			}
			row.Error = strings.Join(rowErrs, "; ")
			out = append(out, row)
		}
	}
	return out, nil
}
