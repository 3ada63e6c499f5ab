package sink

// SetAfterProduce lets tests crash the publisher between produce and delete.
func SetAfterProduce(p *Publisher, f func() error) { p.afterProduce = f }

// ClosePublisher releases the publisher's producer.
func ClosePublisher(p *Publisher) { p.close() }
