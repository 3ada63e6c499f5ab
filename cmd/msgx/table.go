package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lovoo/goka"

	"msgx/internal/kafka"
	"msgx/processors/router"
	"msgx/sink"
	"msgx/tables/flight"
	"msgx/tables/refdata"
)

// tableListLimit is how many entries `msgx table list` shows unless told.
const tableListLimit = 100

// tableView is a goka table an operator can read.
type tableView struct {
	table goka.Table
	codec goka.Codec
	// view turns a table value into what the operator sees.
	view func(any) any
}

// tables are the goka tables an operator can read, by CLI name (their
// topics carry the deployment's MSGX_KAFKA_PREFIX).
func tables(cfg Config) map[string]tableView {
	return map[string]tableView{
		"messages": {cfg.Router.Table(), kafka.JSON[router.Entry]{}, func(v any) any { return newMessageView(v.(*router.Entry)) }},
		// The flight JSON of docs/design.md#events without the table's
		// bookkeeping (or, for a master not created yet, the children
		// waiting for it).
		"flights": {cfg.Flights.Table(), kafka.JSON[flight.State]{}, func(v any) any { return v.(*flight.State).Inspect() }},
		"refdata": {cfg.Refdata.Table(), kafka.JSON[refdata.State]{}, func(v any) any { return v.(*refdata.State).List() }},
	}
}

// messageView is a router-table entry as `msgx table` shows it. The table
// keeps the router's decision as it made it: a ROUTED message stays ROUTED
// there after the flights and refdata processors complete it. State is the
// message's state now (PostgreSQL proc_state), the one msgx status and
// msgx trace show.
type messageView struct {
	MsgID int64 `json:"msgId"`
	// State is the message's state now; StateError says why it is missing.
	State      string `json:"state,omitempty"`
	StateError string `json:"stateError,omitempty"`
	// Decision is the router's decision (router.Entry.State).
	Decision     string     `json:"decision"`
	ErrorClass   string     `json:"errorClass,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	Detail       string     `json:"detail,omitempty"`
	IdentityKey  string     `json:"identityKey,omitempty"`
	Type         string     `json:"type,omitempty"`
	STYP         string     `json:"styp,omitempty"`
	Attempts     int        `json:"attempts"`
	NTransitions int        `json:"nTransitions"`
	ReceivedAt   *time.Time `json:"receivedAt"`
	EnqueuedAt   time.Time  `json:"enqueuedAt"`
	DecidedAt    time.Time  `json:"decidedAt"`
}

func newMessageView(e *router.Entry) *messageView {
	return &messageView{MsgID: e.MsgID, Decision: e.State, ErrorClass: e.ErrorClass, Reason: e.Reason, Detail: e.Detail,
		IdentityKey: e.IdentityKey, Type: e.Type, STYP: e.STYP, Attempts: e.Attempts, NTransitions: e.NTransitions,
		ReceivedAt: e.ReceivedAt, EnqueuedAt: e.EnqueuedAt, DecidedAt: e.DecidedAt}
}

// flightSummary is one line of `msgx table list flights`.
type flightSummary struct {
	FLID         string `json:"flid"`
	State        string `json:"state"`
	StateVersion int64  `json:"stateVersion"`
	LastMsgID    int64  `json:"lastMsgId"`
	FLNO         string `json:"FLNO,omitempty"`
	SODT         string `json:"SODT,omitempty"`
}

// categorySummary is one line of `msgx table list refdata`.
type categorySummary struct {
	RType   string `json:"rtype"`
	Records int    `json:"records"`
}

// tableCommand is `msgx table get <table> <key>` (one entry) and `msgx
// table list <table> [<RTYPE>] [--limit N]` (entries: the newest messages,
// the first flights and categories by key, or the records of one reference
// category), as JSON. It reads the table's changelog from Kafka, so it
// works while the daemon runs and shows what the processors have committed.
func tableCommand(fs *flag.FlagSet) runFunc {
	limit := fs.Int("limit", tableListLimit, "list: the most entries to show")
	return func(ctx context.Context, x *invocation, args []string) error {
		if len(args) < 2 || (args[0] != "get" && args[0] != "list") {
			return usagef("want get <table> <key> or list <table>, a table being %s", tableNames())
		}
		t, ok := tables(x.cfg)[args[1]]
		if !ok {
			return usagef("unknown table %q (want %s)", args[1], tableNames())
		}
		if *limit <= 0 {
			return usagef("--limit %d: must be positive", *limit)
		}
		switch {
		case args[0] == "get" && len(args) == 3:
			return readTable(ctx, x, t, func(v *goka.View) (any, error) { return getEntry(ctx, x, t, v, args[1], args[2]) })
		case args[0] == "get":
			return usagef("get %s takes one key", args[1])
		case len(args) == 2:
			return readTable(ctx, x, t, func(v *goka.View) (any, error) { return listEntries(ctx, x, t, v, args[1], *limit) })
		case args[1] == "refdata" && len(args) == 3:
			return readTable(ctx, x, t, func(v *goka.View) (any, error) {
				val, err := getEntry(ctx, x, t, v, args[1], args[2])
				if err != nil {
					return nil, err
				}
				recs := val.([]refdata.View)
				return recs[:min(len(recs), *limit)], nil
			})
		case args[1] == "refdata":
			return usagef("list refdata takes at most one RTYPE")
		default:
			return usagef("list %s takes no key (get %s <key> reads one)", args[1], args[1])
		}
	}
}

// readTable recovers t and prints what read makes of it.
func readTable(ctx context.Context, x *invocation, t tableView, read func(*goka.View) (any, error)) error {
	cfg := x.cfg
	brokers := cfg.Kafka.Brokers
	if cfg.Kafka.Embedded() {
		brokers = []string{cfg.Kafka.EmbeddedAddr}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return kafka.ReadTable(ctx, brokers, cfg.Kafka, t.table, t.codec, x.log, func(v *goka.View) error {
		val, err := read(v)
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(val, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(x.stdout, string(b))
		return err
	})
}

func getEntry(ctx context.Context, x *invocation, t tableView, v *goka.View, name, key string) (any, error) {
	val, err := v.Get(key)
	if err != nil {
		return nil, err
	}
	if val == nil {
		return nil, fmt.Errorf("%s %s: not found", name, key)
	}
	out := t.view(val)
	if m, ok := out.(*messageView); ok {
		withStates(ctx, x, []*messageView{m})
	}
	return out, nil
}

// listEntries lists up to limit entries of table name: the newest messages
// (highest MSG_IDs, in ID order), the first flights and categories by key.
// Only the keys are collected (the view holds the table anyway); only the
// entries shown are decoded.
func listEntries(ctx context.Context, x *invocation, t tableView, v *goka.View, name string, limit int) (any, error) {
	it, err := v.Iterator()
	if err != nil {
		return nil, err
	}
	var keys []string
	for it.Next() {
		keys = append(keys, it.Key())
	}
	it.Release()
	if err := it.Err(); err != nil {
		return nil, err
	}
	if name == "messages" {
		slices.SortFunc(keys, func(a, b string) int {
			x, _ := strconv.ParseInt(a, 10, 64)
			y, _ := strconv.ParseInt(b, 10, 64)
			return cmp.Compare(x, y)
		})
		keys = keys[max(0, len(keys)-limit):]
	} else {
		slices.Sort(keys)
		keys = keys[:min(len(keys), limit)]
	}
	var msgs []*messageView
	flights := []flightSummary{}
	cats := []categorySummary{}
	for _, k := range keys {
		val, err := v.Get(k)
		if err != nil || val == nil {
			continue // a tombstone, or deleted meanwhile
		}
		switch e := val.(type) {
		case *router.Entry:
			msgs = append(msgs, newMessageView(e))
		case *flight.State:
			flights = append(flights, flightSummary{FLID: e.FLID, State: e.State, StateVersion: e.StateVersion, LastMsgID: e.LastMsgID,
				FLNO: e.Fields["FLNO"], SODT: e.Fields["SODT"]})
		case *refdata.State:
			cats = append(cats, categorySummary{RType: k, Records: len(e.Records)})
		}
	}
	switch name {
	case "messages":
		if msgs == nil {
			msgs = []*messageView{}
		}
		withStates(ctx, x, msgs)
		return msgs, nil
	case "flights":
		return flights, nil
	}
	return cats, nil
}

// withStates fills in each message's state now from PostgreSQL; without
// PostgreSQL each says why it has none.
func withStates(ctx context.Context, x *invocation, ms []*messageView) {
	if len(ms) == 0 {
		return
	}
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.MsgID
	}
	states, err := func() (map[int64]string, error) {
		pool, err := sink.OpenPG(ctx, x.cfg.DB)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		ctx, cancel := context.WithTimeout(ctx, x.cfg.DB.Timeout)
		defer cancel()
		rows, err := pool.Query(ctx, `SELECT msg_id, state FROM proc_state WHERE msg_id = ANY($1)`, ids)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[int64]string{}
		for rows.Next() {
			var id int64
			var st string
			if err := rows.Scan(&id, &st); err != nil {
				return nil, err
			}
			out[id] = st
		}
		return out, rows.Err()
	}()
	for _, m := range ms {
		switch {
		case err != nil:
			m.StateError = "PostgreSQL not read: " + oneLine(err)
		case states[m.MsgID] == "":
			m.StateError = "no proc_state row"
		default:
			m.State = states[m.MsgID]
		}
	}
}

func tableNames() string {
	return strings.Join(slices.Sorted(maps.Keys(tables(Config{}))), "|")
}
