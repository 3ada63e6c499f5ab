package aodb_test

import (
	"strings"
	"testing"

	"msgx/sink/aodb"
)

// The table names are formatted into the statements: anything but a table
// name is refused before a statement runs, and so is a missing connection.
func TestNewRefusesBadNamesAndDeps(t *testing.T) {
	_, err := aodb.New(aodb.Config{InboxTable: "cminmsgs; DROP TABLE x", OutboxTable: "coutmsgs; drop"}, aodb.Deps{})
	for _, want := range []string{"MSGX_INBOX_TABLE", "MSGX_OUTBOX_TABLE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want it to name %q", err, want)
		}
	}
	_, err = aodb.New(aodb.Config{InboxTable: "cminmsgs", OutboxTable: "coutmsgs"}, aodb.Deps{})
	for _, want := range []string{"no MySQL connection", "MSGX_DB_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New without deps = %v, want it to name %q", err, want)
		}
	}
}
