package event

// SetAfterProduce lets tests crash the publisher between produce and delete.
func SetAfterProduce(p *Publisher, f func() error) { p.afterProduce = f }
