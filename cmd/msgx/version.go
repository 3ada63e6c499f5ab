package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
)

// versionCommand is `msgx version`: the module version and the VCS
// revision the binary was built from, as the Go toolchain recorded them
// (a build with -buildvcs=false, or outside a checkout, has no revision).
func versionCommand(*flag.FlagSet) runFunc {
	return func(_ context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			return errors.New("this binary carries no build information")
		}
		fmt.Fprintf(x.stdout, "msgx %s\n", bi.Main.Version)
		rev, when, modified := "unknown (built without VCS information)", "", ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = " " + s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (modified)"
				}
			}
		}
		fmt.Fprintf(x.stdout, "revision %s%s%s\n", rev, when, modified)
		fmt.Fprintf(x.stdout, "built with %s\n", bi.GoVersion)
		return nil
	}
}
