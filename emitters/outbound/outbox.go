package outbound

import (
	"context"
	"strconv"
	"time"

	"msgx/tables/request"
	"msgx/tables/sis"
)

// findInOutbox looks for r's row among the rows written since its first
// attempt (aodb.Tables.FindRequest: a locking read that waits for an insert
// of an earlier attempt still in flight). It returns the row's ID and
// COUTMSGS_DATE_INSERTED.
//
// The search's LIKE only narrows the candidates; each one is decoded and
// must carry our SNDR, TYPE and SEQN, so a SEQN that happens to appear
// elsewhere in another message never counts.
func (s *Requests) findInOutbox(ctx context.Context, r request.ReqTrack) (id int64, insertedAt time.Time, found bool, err error) {
	rows, err := s.outbox.FindRequest(ctx, r.OutboxFloor, r.SEQN)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	seqn := strconv.FormatInt(r.SEQN, 10)
	var ids []int64
	for _, row := range rows {
		m, derr := sis.Decode([]byte(row.Text), s.loc)
		if derr != nil || m.Meta.SNDR != r.SNDR || m.Meta.TYPE != string(r.Kind) || m.Meta.SEQN != seqn {
			continue
		}
		if !found {
			id, insertedAt, found = row.ID, row.InsertedAt, true
		}
		ids = append(ids, row.ID)
	}
	if len(ids) > 1 {
		// Not expected: the request reached the outbox more than once. The
		// first row is the request; the AODB will answer the others too,
		// and those answers find the request closed.
		s.log.Error("request found more than once in the outbox", "seqn", r.SEQN, "request_id", r.ID, "outbox_ids", ids)
	}
	return id, insertedAt, found, nil
}
