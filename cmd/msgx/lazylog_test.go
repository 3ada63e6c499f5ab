package main

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"
)

// TestLazyAttrsSameOutput checks the lazy handler logs what the JSON handler
// logs: attributes of With in order, through groups, once per logger.
func TestLazyAttrsSameOutput(t *testing.T) {
	logAll := func(l *slog.Logger) {
		a := l.With("component", "flights")
		b := a.With("msg_id", int64(7), "flid", "123")
		b.Info("applied", "state_version", 3)
		b.Debug("hidden")
		a.Warn("other", "n", 1)
		g := b.WithGroup("g").With("k", "v")
		g.Error("grouped", "x", true)
		b.With().Info("again")
	}
	var want, got bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	logAll(slog.New(slog.NewJSONHandler(&want, opts)))
	logAll(slog.New(lazy(slog.NewJSONHandler(&got, opts))))
	times := regexp.MustCompile(`"time":"[^"]*",`)
	w, g := times.ReplaceAllString(want.String(), ""), times.ReplaceAllString(got.String(), "")
	if w != g {
		t.Fatalf("lazy handler wrote\n%s\nthe JSON handler\n%s", g, w)
	}
	if n := bytes.Count(got.Bytes(), []byte("\n")); n != 4 {
		t.Fatalf("%d lines, want 4:\n%s", n, g)
	}
}
