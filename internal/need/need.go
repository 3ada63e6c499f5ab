package need

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
)

// A Need is one collaborator a component requires: nil when it is there,
// otherwise the line that says it is missing.
type Need func(component string) error

// Check returns, joined, the line of every need of component that is not
// met (nil when all are): a Deps.Validate is one call of it.
func Check(component string, needs ...Need) error {
	var errs []error
	for _, n := range needs {
		if err := n(component); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Has is a collaborator named what that is there when ok: "<component>: no
// <what>" otherwise.
func Has(ok bool, what string) Need {
	return func(component string) error {
		if ok {
			return nil
		}
		return fmt.Errorf("%s: no %s", component, what)
	}
}

// Valid is a check of the component's own (err, nil when it passed).
func Valid(err error) Need { return func(string) error { return err } }

// Pool is msgx's PostgreSQL pool.
func Pool(p *pgxpool.Pool) Need { return Has(p != nil, "PostgreSQL pool") }

// Clock is the injected clock.
func Clock(c clock.Clock) Need { return Has(c != nil, "clock") }

// Log is the component's logger.
func Log(l *slog.Logger) Need { return Has(l != nil, "logger") }

// Brokers are the Kafka bootstrap addresses.
func Brokers(b []string) Need { return Has(len(b) > 0, "Kafka brokers") }

// errTimeout is Timeout's line: the variable the timeout comes from.
var errTimeout = errors.New("MSGX_DB_TIMEOUT: must be positive")

// Timeout is the database call timeout (MSGX_DB_TIMEOUT), positive.
func Timeout(d time.Duration) Need {
	return func(string) error {
		if d <= 0 {
			return errTimeout
		}
		return nil
	}
}
