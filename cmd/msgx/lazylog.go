package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// lazyAttrs is a slog handler whose attributes (Logger.With) are handed to
// the handler below only when a record is logged. The hot paths make a
// logger per message (msg_id, flid) and almost never log with it; the
// JSON handler formats a With's attributes at once, which took ~1 % of
// msgx's CPU on a backlog. The output is the same.
type lazyAttrs struct {
	h     slog.Handler // where the attributes go
	attrs []slog.Attr

	once  sync.Once
	built slog.Handler
}

// lazy wraps h so that its With attributes are formatted on first use.
func lazy(h slog.Handler) slog.Handler { return &lazyAttrs{h: h} }

func (l *lazyAttrs) handler() slog.Handler {
	l.once.Do(func() {
		l.built = l.h
		if len(l.attrs) > 0 {
			l.built = l.h.WithAttrs(l.attrs)
		}
	})
	return l.built
}

func (l *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return l.handler().Handle(ctx, r)
}

func (l *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return l
	}
	return &lazyAttrs{h: l.h, attrs: append(slices.Clip(l.attrs), attrs...)}
}

// WithGroup is rare: the attributes so far are formatted, later ones are
// lazy again.
func (l *lazyAttrs) WithGroup(name string) slog.Handler {
	if name == "" {
		return l
	}
	return lazy(l.handler().WithGroup(name))
}
