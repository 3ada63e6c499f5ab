package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"msgx/internal/testenv"
	"msgx/sink/sinktest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runCommand runs the subcommand name with cfg as realMain does once the
// configuration is read: its flags parsed by its own flag set, then its
// code.
func runCommand(ctx context.Context, cfg Config, name string, args []string, out io.Writer, log *slog.Logger) error {
	for _, c := range commands() {
		if c.name == name {
			_, run, rest, err := c.parse(args)
			if err != nil {
				return err
			}
			return run(ctx, &invocation{cfg: cfg, stdout: out, log: log}, rest)
		}
	}
	return fmt.Errorf("no command %q", name)
}

// cli runs realMain and returns its exit status and streams.
func cli(t *testing.T, environ map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := realMain(args, environ, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCLIHelpAndUsageErrors: help goes to stdout with status 0; a wrong
// command line is one line naming the command, then the usage, on stderr
// with status 2, without touching a database (the DSNs point nowhere).
func TestCLIHelpAndUsageErrors(t *testing.T) {
	nowhere := freeAddr(t)
	environ := map[string]string{
		"MSGX_PG_DSN":        "postgres://msgx@" + nowhere + "/msgx?sslmode=disable",
		"MSGX_MYSQL_DSN":     "root@tcp(" + nowhere + ")/inbox",
		"MSGX_KAFKA_BROKERS": nowhere,
		"MSGX_STATE_DIR":     t.TempDir(),
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, out, errOut := cli(t, environ, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "msgx — ") {
			t.Errorf("msgx %v: status %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		for _, c := range commands() {
			if !strings.Contains(out, "\n  "+c.name+" ") {
				t.Errorf("msgx %v does not list %s:\n%s", args, c.name, out)
			}
		}
	}
	if code, out, errOut := cli(t, environ); code != 2 || out != "" || !strings.HasPrefix(errOut, "msgx: no command given\n\n") ||
		!strings.Contains(errOut, "Usage: msgx <command>") {
		t.Errorf("msgx alone: status %d, stdout %q, stderr %q", code, out, errOut)
	}
	for typo, want := range map[string]string{"stauts": "status", "trcae": "trace", "replya": "replay", "reb": "rebuild", "Status": "status",
		"statsu": "status", "re": "", "xyzzy": ""} {
		code, _, errOut := cli(t, environ, typo)
		first, _, _ := strings.Cut(errOut, "\n")
		line := fmt.Sprintf("msgx: unknown command %q", typo)
		if want != "" {
			line += " (did you mean " + want + "?)"
		}
		if code != 2 || first != line {
			t.Errorf("msgx %s: status %d, first line %q, want %q", typo, code, first, line)
		}
	}
	if code, out, errOut := cli(t, environ, "frobnicate"); code != 2 || out != "" ||
		!strings.HasPrefix(errOut, "msgx: unknown command \"frobnicate\"\n") || !strings.Contains(errOut, "Usage: msgx <command>") {
		t.Errorf("unknown command: status %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := cli(t, environ, "help", "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("help on an unknown command: status %d, stderr %q", code, errOut)
	}

	// Every command's --help, -h and `msgx help <cmd>`: its usage on stdout.
	for _, c := range commands() {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			code, out, errOut := cli(t, environ, args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: msgx "+c.name) || !strings.Contains(out, c.summary) {
				t.Errorf("msgx %v: status %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
	}
	// Flags are listed as the usage lines and the README write them.
	if _, out, _ := cli(t, environ, "replay", "--help"); !strings.Contains(out, "\n  --dry-run\n") || !strings.Contains(out, "\n  --reason-prefix string\n") ||
		!strings.Contains(out, "\n  --force\n") {
		t.Errorf("replay --help lists no flags:\n%s", out)
	}
	for _, c := range commands() {
		_, out, _ := cli(t, environ, c.name, "--help")
		if _, flags, ok := strings.Cut(out, "\nFlags:\n"); ok && regexp.MustCompile(`(?m)^  -[a-z]`).MatchString(flags) {
			t.Errorf("msgx %s --help lists a flag with one dash:\n%s", c.name, out)
		}
	}
	if _, out, _ := cli(t, environ, "trace", "--help"); !strings.Contains(out, "\n  --limit int\n") || !strings.Contains(out, "(default 200)") {
		t.Errorf("trace --help:\n%s", out)
	}
	// --help anywhere on the line, even after a wrong argument.
	if code, out, _ := cli(t, environ, "table", "get", "messages", "--help"); code != 0 || !strings.HasPrefix(out, "Usage: msgx table") {
		t.Errorf("table get messages --help: status %d, stdout %q", code, out)
	}

	for _, tc := range []struct {
		args []string
		line string // stderr's first line
	}{
		{[]string{"status", "--bogus"}, "msgx status: flag provided but not defined: --bogus"},
		{[]string{"trace", "--limit", "x", "--flid", "1"}, `msgx trace: invalid value "x" for flag --limit: parse error`},
		{[]string{"status", "now"}, `msgx status: unexpected argument "now"`},
		{[]string{"run", "fast"}, `msgx run: unexpected argument "fast"`},
		{[]string{"table"}, "msgx table: want get <table> <key> or list <table>, a table being flights|messages|refdata"},
		{[]string{"table", "get", "messages"}, "msgx table: get messages takes one key"},
		{[]string{"table", "list", "flights", "15"}, "msgx table: list flights takes no key (get flights <key> reads one)"},
		{[]string{"table", "list", "refdata", "AIRL", "CITY"}, "msgx table: list refdata takes at most one RTYPE"},
		{[]string{"table", "list", "messages", "--limit", "0"}, "msgx table: --limit 0: must be positive"},
		{[]string{"table", "get", "passengers", "1"}, `msgx table: unknown table "passengers" (want flights|messages|refdata)`},
		{[]string{"backfill"}, "msgx backfill: want abandoned or reopen"},
		{[]string{"backfill", "reopen"}, "msgx backfill: reopen needs at least one MSG_ID"},
		{[]string{"backfill", "reopen", "12", "x"}, `msgx backfill: "x" is not a MSG_ID`},
		{[]string{"backfill", "forget"}, `msgx backfill: unknown action "forget" (want abandoned or reopen)`},
		{[]string{"request"}, "msgx request: want refdata, flights, list or show"},
		{[]string{"request", "show"}, "msgx request: show needs one request ID"},
		{[]string{"request", "show", "x1"}, `msgx request: request ID "x1" is not a positive integer`},
		{[]string{"request", "list", "--from", "2026-11-30T08:00"}, "msgx request: --from and --to are for request flights"},
		{[]string{"request", "refdata", "AIRL", "--json"}, "msgx request: --json is for request list and request show"},
		{[]string{"request", "refdata"}, "msgx request: refdata needs at least one RTYPE"},
		{[]string{"request", "refdata", "AIRL", "--from", "2026-11-30T08:00"}, "msgx request: --from and --to are for request flights"},
		{[]string{"request", "flights", "--from", "2026-11-30T08:00"}, `msgx request: --to: "" is not a time (want 2006-01-02T15:04 airport local, or RFC 3339)`},
		{[]string{"request", "flights", "--from"}, "msgx request: flag needs an argument: --from"},
		{[]string{"replay"}, "msgx replay: give exactly one of --class, --reason-prefix, --ids or --pending"},
		{[]string{"replay", "--class", "INFRA", "--ids", "3"}, "msgx replay: give exactly one of --class, --reason-prefix, --ids or --pending"},
		{[]string{"replay", "--ids", "1,x"}, `msgx replay: --ids: "x" is not a MSG_ID`},
		{[]string{"replay", "--class", "MALFORMED"}, "msgx replay: replay class MALFORMED: "},
		{[]string{"rebuild", "--yes", "now"}, `msgx rebuild: unexpected argument "now"`},
		{[]string{"migrate", "sideways"}, `msgx migrate: unknown action "sideways" (want up, down [N] or version)`},
		{[]string{"migrate", "down", "x"}, `msgx migrate: "x" is not a step count`},
		{[]string{"version", "--short"}, "msgx version: flag provided but not defined: --short"},
	} {
		code, out, errOut := cli(t, environ, tc.args...)
		first, rest, _ := strings.Cut(errOut, "\n")
		if code != 2 || out != "" || !strings.HasPrefix(first, tc.line) || !strings.HasPrefix(rest, "Usage: msgx "+tc.args[0]) {
			t.Errorf("msgx %v: status %d, stdout %q, stderr:\n%s\nwant first line %q, then the usage", tc.args, code, out, errOut, tc.line)
		}
	}

	// An invalid configuration: status 2, each problem on its line.
	bad := map[string]string{"MSGX_LOG_LEVEL": "loud", "MSGX_KAFKA_PREFIX": "team a/"}
	code, out, errOut := cli(t, bad, "status")
	if code != 2 || out != "" || !strings.HasPrefix(errOut, "msgx: invalid configuration:\n") ||
		!strings.Contains(errOut, "\n  MSGX_LOG_LEVEL=") || !strings.Contains(errOut, "\n  MSGX_KAFKA_PREFIX: \"team a/\" has ' '") {
		t.Errorf("invalid configuration: status %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	// … which help does not need.
	if code, _, _ := cli(t, bad, "status", "--help"); code != 0 {
		t.Errorf("status --help with an invalid configuration: status %d", code)
	}
}

// An operator command's failure is one plain line on stderr and status 1;
// a daemon's is a JSON log line.
func TestCLIRuntimeErrors(t *testing.T) {
	nowhere := freeAddr(t)
	environ := map[string]string{
		"MSGX_PG_DSN":     "postgres://msgx@" + nowhere + "/msgx?sslmode=disable&connect_timeout=2",
		"MSGX_MYSQL_DSN":  "root@tcp(" + nowhere + ")/inbox",
		"MSGX_STATE_DIR":  t.TempDir(),
		"MSGX_DB_TIMEOUT": "2s",
	}
	for _, args := range [][]string{{"backfill", "abandoned"}, {"migrate", "version"}, {"replay", "--class", "INFRA", "--dry-run"}} {
		code, out, errOut := cli(t, environ, args...)
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "msgx "+args[0]+": ") ||
			!strings.Contains(errOut, nowhere) {
			t.Errorf("msgx %v with PostgreSQL unreachable: status %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}

	// `msgx ingest` without a cluster refuses to start: a daemon, so JSON.
	code, _, errOut := cli(t, environ, "ingest")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, "{") || !strings.Contains(last, `"msg":"msgx stopped with an error"`) ||
		!strings.Contains(last, "only `msgx run` starts the embedded Kafka") {
		t.Errorf("msgx ingest without brokers: status %d, stderr:\n%s", code, errOut)
	}
}

func TestCLIVersion(t *testing.T) {
	code, out, errOut := cli(t, map[string]string{"MSGX_LOG_LEVEL": "invalid: version reads no configuration"}, "version")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "msgx ") || !strings.Contains(out, "\nrevision ") || !strings.Contains(out, "\nbuilt with go") {
		t.Errorf("msgx version: status %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		pos, from string
	}{
		{[]string{"flights", "--from", "a"}, "flights", "a"},
		{[]string{"--from", "a", "flights"}, "flights", "a"},
		{[]string{"x", "--from=a", "y"}, "x y", "a"},
		{[]string{"x", "--", "--from", "y"}, "x --from y", ""},
		{nil, "", ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		from := fs.String("from", "", "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil || strings.Join(pos, " ") != tc.pos || *from != tc.from {
			t.Errorf("%q: positional %q, --from %q, %v; want %q, %q", tc.args, pos, *from, err, tc.pos, tc.from)
		}
	}
}

// `msgx status --exit-code` is a monitoring check: status 0 while the
// running gateway has no alert (it has read an ignored message, which
// seeds ingest), 1 with the report on stdout once it has one (a DEAD
// message); without the flag the same report exits 0.
func TestStatusExitCode(t *testing.T) {
	environ, myDSN := testEnviron(t, map[string]string{"MSGX_HTTP_ADDR": freeAddr(t)})
	cfg, err := loadConfig(environ)
	if err != nil {
		t.Fatal(err)
	}
	my := sinktest.OpenMySQL(t, myDSN)
	testenv.InsertInbox(t, my, `<MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20261130080000</DTTM><TYPE>LDM</TYPE><STYP>LDM</STYP></META><LDM><FLID>1</FLID></LDM></MSG>`)
	stop := start(t, cfg)
	var code int
	var out, errOut string
	waitFor(t, "status --exit-code 0 once the gateway is up", time.Minute, func() bool {
		code, out, errOut = cli(t, environ, "status", "--exit-code")
		return code == 0
	})
	if !strings.Contains(out, "ALERTS: none") || errOut != "" {
		t.Fatalf("status without alerts: stdout %q, stderr %q", out, errOut)
	}
	testenv.InsertInbox(t, my, "not XML at all")
	waitFor(t, "status --exit-code 1 with the DEAD message", time.Minute, func() bool {
		code, out, errOut = cli(t, environ, "status", "--exit-code")
		return code == 1
	})
	if !strings.Contains(out, "ALERTS (") || !strings.Contains(out, "latest #2 MALFORMED: not XML") || errOut != "" {
		t.Fatalf("status --exit-code with an alert: stdout %q, stderr %q", out, errOut)
	}
	if strings.Contains(out, "MALFORMED: MALFORMED") || !strings.Contains(out, "COMPONENTS\n  NAME ") {
		t.Errorf("status from the daemon repeats the class or lacks the components:\n%s", out)
	}
	if code, out, _ := cli(t, environ, "status", "--json"); code != 0 || !strings.Contains(out, `"alerts": [`) {
		t.Fatalf("status --json without --exit-code: status %d\n%s", code, out)
	}

	// Without the daemon the report is read directly; its components are
	// known only to a daemon, which the report says instead of leaving
	// the section out.
	stop()
	code, out, errOut = cli(t, environ, "status")
	if code != 0 || !strings.Contains(out, "COMPONENTS\n  not reached: no msgx daemon answered at http://"+cfg.HTTPAddr+"/status") {
		t.Errorf("status without the daemon: %d\n%s\n%s", code, out, errOut)
	}
}
