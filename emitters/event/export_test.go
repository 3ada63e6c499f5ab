package event

// SetHook lets tests stop the publisher at its crash points (PointInBatch,
// PointAfterCommit, PointReconcile): an error returned there is a crash,
// after which the test discards the publisher as a restart would.
func SetHook(p *Publisher, f func(point string) error) { p.hook = f }
