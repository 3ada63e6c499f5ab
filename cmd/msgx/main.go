package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"text/tabwriter"

	"msgx/internal/pacer"
)

// commands lists every subcommand in the order `msgx help` shows them.
// Adding one is one line here; its flags and code live next to its
// function (see command).
func commands() []command {
	return []command{
		{name: "run", daemon: true, define: gatewayCommand(roleAll),
			summary: "every role in one process (embedded Kafka when MSGX_KAFKA_BROKERS is empty)"},
		{name: "ingest", daemon: true, define: gatewayCommand(roleIngest),
			summary: "the ingest role only: inbox → msgx.inbox, plus POST /cminmsgs/send"},
		{name: "process", daemon: true, define: gatewayCommand(roleProcess),
			summary: "the processing role only: the goka processors (router, flights, refdata)"},
		{name: "broker", daemon: true, define: brokerCommand,
			summary: "the embedded Kafka alone, on MSGX_EMBEDDED_KAFKA_ADDR"},
		{name: "status", synopsis: "[--json] [--exit-code]", define: statusCommand,
			summary: "is it keeping up, is anything stuck, what must a human look at"},
		{name: "table", synopsis: "get messages|flights|refdata <KEY> | list messages|flights|refdata [<RTYPE>] [--limit N]", define: tableCommand,
			summary: "a message, a flight or a reference category from the goka tables, or a list of them (JSON)"},
		{name: "replay", synopsis: "(--class C | --reason-prefix P | --ids 1,2 | --pending) [--dry-run] [--force] [--who NAME]", define: replayCommand,
			summary: "re-inject replayable messages (CODEC_ERROR, INFRA, EXHAUSTED, unsupported:)"},
		{name: "trace", synopsis: "[--json] <MSG_ID> | [--json] [--limit N] --flid <FLID>", define: traceCommand,
			summary: "one message's whole path and where it is stuck, or a flight's history version by version"},
		{name: "rebuild", synopsis: "[--yes]", define: rebuildCommand,
			summary: "rebuild every goka table and derived PostgreSQL table from msgx.inbox (stop msgx first)"},
		{name: "request", synopsis: "refdata <RTYPE>... | flights --from T --to T | list [--json] [--limit N] | show [--json] <ID>", define: requestCommand,
			summary: "send an RQRD for reference categories or an RQFD for a flight window (COUTMSGS); list and show the tracked requests"},
		{name: "backfill", synopsis: "abandoned | reopen <MSG_ID>...", define: backfillCommand,
			summary: "processed marks msgx stopped trying to write, and putting them back into the sweep"},
		{name: "bind", synopsis: "[--force]", define: bindCommand,
			summary: "show the Kafka cluster the database is bound to; --force binds it to the one reached now"},
		{name: "reseed", synopsis: "[--yes]", define: reseedCommand,
			summary: "write the goka flights and refdata tables of a new, empty Kafka cluster from PostgreSQL"},
		{name: "samples", synopsis: "[--dir DIR]", define: samplesCommand,
			summary: "insert every SIS sample of testdata/sis-samples into a development inbox, each with its own SEQN"},
		{name: "migrate", synopsis: "[up | down [N] | version]", define: migrateCommand,
			summary: "PostgreSQL schema migrations (msgx run applies them itself)"},
		{name: "version", bare: true, define: versionCommand,
			summary: "the build's module version and VCS revision"},
	}
}

// A command is one subcommand. Its flags are its own flag.FlagSet, which
// define fills; the dispatcher parses them (flags may come before, after
// or between the arguments) before the configuration is read, so `--help`
// and a usage error never depend on MSGX_* or on a reachable database.
type command struct {
	name string
	// synopsis follows "msgx <name>" in the usage line: flags and arguments.
	synopsis string
	// summary is the command's line in `msgx help` and the head of its --help.
	summary string
	// daemon commands log JSON lines (log/slog) to stderr, an error as
	// "msgx stopped with an error"; the others are for people: an error is
	// one plain line on stderr, logs are text and warnings only.
	daemon bool
	// bare commands read no configuration (version).
	bare bool
	// define defines the command's flags on fs and returns what runs it
	// once they are parsed, with the positional arguments.
	define func(fs *flag.FlagSet) runFunc
}

// runFunc runs a command. A usageError exits 2 with the usage; an
// exitStatus exits with its code silently; any other error is the
// command's failure (exit 1).
type runFunc func(ctx context.Context, x *invocation, args []string) error

// invocation is what a command runs with.
type invocation struct {
	cfg    Config
	stdout io.Writer
	log    *slog.Logger
}

// usageError is a command line the command cannot run: exit 2, one line
// and the usage on stderr.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitStatus ends the command with a code and nothing more to say (status
// --exit-code with alerts: the report is the explanation).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// noArgs refuses positional arguments to a command that takes none.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

func main() {
	_, gogc := os.LookupEnv("GOGC")
	_, memLimit := os.LookupEnv("GOMEMLIMIT")
	if !gogc && !memLimit {
		// msgx allocates ~65 KB per message at a backlog's pace while
		// its live heap is small: with Go's default pacing collecting
		// took a fifth of its CPU (internal/pacer).
		pacer.Start(pacer.DefaultHeadroom)
	}
	os.Exit(realMain(os.Args[1:], environment(), os.Stdout, os.Stderr))
}

// realMain runs msgx with args (without the program name) and the
// environment environ and returns the exit status: 0 done, 1 the command
// failed, 2 the command line or the configuration is wrong.
func realMain(args []string, environ map[string]string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		fmt.Fprint(stderr, "msgx: no command given\n\n")
		printUsage(stderr, cmds)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) < 2 {
			printUsage(stdout, cmds)
			return 0
		}
		name, args = args[1], []string{args[1], "--help"}
	}
	var c *command
	for i := range cmds {
		if cmds[i].name == name {
			c = &cmds[i]
		}
	}
	if c == nil {
		fmt.Fprintf(stderr, "msgx: unknown command %q%s\n\n", name, didYouMean(name, cmds))
		printUsage(stderr, cmds)
		return 2
	}
	fs, run, rest, err := c.parse(args[1:])
	if errors.Is(err, flag.ErrHelp) {
		c.printUsage(stdout, fs)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "msgx %s: %s\n", c.name, twoDashes(err.Error()))
		c.printUsage(stderr, fs)
		return 2
	}

	var cfg Config
	if !c.bare {
		cfg, err = loadConfig(environ)
		if err != nil {
			fmt.Fprintln(stderr, "msgx: invalid configuration:")
			for _, line := range splitErrors(err) {
				fmt.Fprintln(stderr, "  "+line)
			}
			return 2
		}
	}
	level, _ := parseLevel(cfg.LogLevel)
	var log *slog.Logger
	if c.daemon {
		log = slog.New(lazy(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})))
	} else {
		// People read an operator command's output: its own error is the
		// one line below; the components it drives (goka, the drivers)
		// show warnings and errors only, unless debugging was asked for.
		if level >= slog.LevelInfo {
			level = max(level, slog.LevelWarn)
		}
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = run(ctx, &invocation{cfg: cfg, stdout: stdout, log: log}, rest)

	var ue usageError
	var es exitStatus
	switch {
	case err == nil, c.daemon && errors.Is(err, context.Canceled):
		// A daemon stopped by SIGINT/SIGTERM has done its job.
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "msgx %s: %s\n", c.name, ue.msg)
		c.printUsage(stderr, fs)
		return 2
	case errors.As(err, &es):
		return int(es)
	case c.daemon:
		log.Error("msgx stopped with an error", "component", "main", "err", err)
		return 1
	default:
		fmt.Fprintf(stderr, "msgx %s: %s\n", c.name, oneLine(err))
		return 1
	}
}

// parse gives the command a fresh flag set, parses args with it and returns
// what runs the command with the positional arguments.
func (c *command) parse(args []string) (*flag.FlagSet, runFunc, []string, error) {
	fs := flag.NewFlagSet("msgx "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.define(fs)
	rest, err := parseInterspersed(fs, args)
	return fs, run, rest, err
}

// parseInterspersed parses fs from args, allowing flags after the
// positional arguments (`msgx request flights --from … --to …`), and
// returns the positional arguments. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// oneLine joins a (possibly joined, multi-line) error into one line.
func oneLine(err error) string {
	var b strings.Builder
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if s := b.String(); s != "" && !strings.HasSuffix(s, ":") {
			b.WriteString(";")
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(l)
	}
	return b.String()
}

func printUsage(w io.Writer, cmds []command) {
	fmt.Fprint(w, "msgx — airport message gateway (MySQL inbox → Kafka stream processor → PostgreSQL)\n\n"+
		"Usage: msgx <command> [flags] [arguments]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, "\n`msgx <command> --help` shows a command's arguments and flags.\n"+
		"Configuration comes from MSGX_* environment variables; see docs/operations.md#configuration.\n"+
		"Exit status: 0 done, 1 the command failed, 2 a wrong command line or configuration.\n")
}

func (c *command) printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: msgx %s", c.name)
	if c.synopsis != "" {
		fmt.Fprintf(w, " %s", c.synopsis)
	}
	fmt.Fprintf(w, "\n\n%s\n", c.summary)
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs)
	}
}

// printFlags lists fs's flags as the usage lines and the README write them,
// with two dashes (the flag package accepts both; its own listing uses
// one).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		switch {
		case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "0":
		case name == "string":
			line += fmt.Sprintf(" (default %q)", f.DefValue)
		default:
			line += " (default " + f.DefValue + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// flagName is a flag as the flag package's errors name it ("-limit").
var flagName = regexp.MustCompile(`(^|[\s:])-([A-Za-z][\w-]*)`)

// twoDashes rewrites the flag package's error messages ("flag provided but
// not defined: -bogus") with the flags written as everywhere else
// ("--bogus").
func twoDashes(msg string) string { return flagName.ReplaceAllString(msg, "$1--$2") }

// didYouMean suggests the command a misspelt one most likely meant
// (" (did you mean status?)"): the only command it is the start of, else
// the closest one at most two edits away (one for a word of three letters
// or fewer); nothing when none is close.
func didYouMean(name string, cmds []command) string {
	name = strings.ToLower(name)
	var prefixed []string
	best, bestD := "", min(2, len(name)/2)+1
	for _, c := range cmds {
		if strings.HasPrefix(c.name, name) {
			prefixed = append(prefixed, c.name)
		}
		if d := editDistance(name, c.name); d < bestD {
			best, bestD = c.name, d
		}
	}
	if len(prefixed) == 1 && len(name) >= 2 {
		best = prefixed[0]
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// editDistance is the Levenshtein distance of a and b, where swapping two
// neighbours counts as one edit ("stauts" is one from "status").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

func splitErrors(err error) []string {
	var out []string
	var join interface{ Unwrap() []error }
	if errors.As(err, &join) {
		for _, e := range join.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []string{err.Error()}
}
