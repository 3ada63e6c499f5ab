package sink_test

import (
	"testing"
	"time"

	"msgx/sink"
)

func TestReleasedSkipsOnlyTheHole(t *testing.T) {
	c := sink.Cursor{Watermark: 10, HoleSince: time.Now(), HoleEnd: 13}
	if got := c.Released(sink.Gap{From: 11, To: 13}); got != (sink.Cursor{Watermark: 13}) {
		t.Fatalf("Released = %+v", got)
	}
}
