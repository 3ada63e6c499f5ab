package status

// Queries exposes the SQL of the status report to the plan test
// (package status_test), with one example argument list each.
var Queries = map[string]string{
	"openByState":     sqlOpenByState,
	"head":            sqlHead,
	"terminalByState": sqlTerminalByState,
	"deadByClass":     sqlDeadByClass,
	"deadRecent":      sqlDeadRecent,
	"deadOne":         sqlDeadOne,
	"deadLatest":      sqlDeadLatest,
	"deadLatestNull":  sqlDeadLatestUnknown,
	"skippedByReason": sqlSkippedByReason,
	"backfillPending": sqlBackfillPending,
	"abandoned":       sqlAbandoned,
}
