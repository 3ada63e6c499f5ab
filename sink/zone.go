package sink

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// InboxZone is the time zone of the shared inbox's DATETIME columns
// (CMINMSGS_DATE_*, COUTMSGS_DATE_*): zone-less wall-clock times the AODB
// writes in its MySQL server's zone (docs/design.md#inbox-zone). It is not
// the airport's zone (MSGX_AIRPORT_TZ, the zone of SIS message times): the
// two are separate settings, and often differ (a server kept in UTC at an
// airport in UTC+8).
//
// The zone is MSGX_INBOX_TZ when set; otherwise it is the zone of the MySQL
// session, asked from the server on the first connection (the session
// inherits the server's global time_zone unless MSGX_MYSQL_DSN sets
// time_zone). Asking lazily keeps a MySQL outage at start-up an outage
// (callers retry), not a start-up failure. Once known the zone never
// changes for the process.
type InboxZone struct {
	cfg *mysql.Config // the DSN, for the question; nil with a fixed zone
	log *slog.Logger

	mu     sync.Mutex
	loc    *time.Location
	source string
}

// NewInboxZone returns the zone of c's inbox: MSGX_INBOX_TZ when c.InboxTZ
// is set (known at once), otherwise the MySQL session's, resolved on first
// use. log (optional) receives one line when the zone is known.
func NewInboxZone(c Config, log *slog.Logger) (*InboxZone, error) {
	if c.InboxTZ != "" {
		loc, err := ParseZone(c.InboxTZ)
		if err != nil {
			return nil, fmt.Errorf("MSGX_INBOX_TZ=%q: %w", c.InboxTZ, err)
		}
		z := FixedInboxZone(loc, "MSGX_INBOX_TZ")
		z.log = log
		z.report()
		return z, nil
	}
	mc, err := mysql.ParseDSN(c.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("parsing MSGX_MYSQL_DSN: %w", err)
	}
	if mc.Timeout == 0 {
		mc.Timeout = c.Timeout
	}
	return &InboxZone{cfg: mc, log: log}, nil
}

// FixedInboxZone is a zone known in advance (tests, MSGX_INBOX_TZ); source
// says where it comes from.
func FixedInboxZone(loc *time.Location, source string) *InboxZone {
	return &InboxZone{loc: loc, source: source}
}

// Location returns the zone, asking the MySQL server first if it is not
// known yet.
func (z *InboxZone) Location(ctx context.Context) (*time.Location, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.loc != nil {
		return z.loc, nil
	}
	loc, source, err := sessionZone(ctx, z.cfg, z.log)
	if err != nil {
		return nil, err
	}
	z.loc, z.source = loc, source
	z.report()
	return loc, nil
}

// Known returns the zone and where it comes from without asking the server;
// ok is false while nothing has connected yet.
func (z *InboxZone) Known() (loc *time.Location, source string, ok bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.loc, z.source, z.loc != nil
}

// String names the zone for people: "+08:00 (MySQL session time_zone
// SYSTEM, system_time_zone CST)", or "not known yet (MySQL not reached)".
func (z *InboxZone) String() string {
	loc, source, ok := z.Known()
	if !ok {
		return "not known yet (MySQL not reached)"
	}
	return ZoneName(loc, time.Now()) + " (" + source + ")"
}

func (z *InboxZone) report() {
	if z.log != nil {
		z.log.Info("inbox DATETIMEs are read and written in "+ZoneName(z.loc, time.Now()), "component", "mysql",
			"inbox_zone", z.loc.String(), "source", z.source)
	}
}

// ZoneName is how msgx names a zone in what it shows: "UTC", or the offset
// at t ("+08:00"), followed by the IANA name when there is one
// ("+08:00 Asia/Shanghai").
func ZoneName(loc *time.Location, t time.Time) string {
	_, off := t.In(loc).Zone()
	name := loc.String()
	if off == 0 && (name == "UTC" || name == "Etc/UTC" || strings.HasPrefix(name, "+00")) {
		return "UTC"
	}
	s := t.In(loc).Format("-07:00")
	if strings.Contains(name, "/") {
		s += " " + name
	}
	return s
}

// offsetZone is a fixed offset as MySQL writes it: +08:00, -05:30.
var offsetZone = regexp.MustCompile(`^([+-])(\d{1,2}):(\d{2})$`)

// ParseZone reads a zone as MSGX_INBOX_TZ takes it: an IANA name
// (Asia/Shanghai, UTC) or a fixed offset (+08:00).
func ParseZone(s string) (*time.Location, error) {
	s = strings.TrimSpace(s)
	if m := offsetZone.FindStringSubmatch(s); m != nil {
		h, _ := strconv.Atoi(m[2])
		min, _ := strconv.Atoi(m[3])
		if h > 14 || min > 59 {
			return nil, errors.New("offset out of range")
		}
		off := h*3600 + min*60
		if m[1] == "-" {
			off = -off
		}
		if off == 0 {
			return time.UTC, nil
		}
		return time.FixedZone(fmt.Sprintf("%s%02d:%02d", m[1], h, min), off), nil
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, fmt.Errorf("want an IANA zone name (Asia/Shanghai) or an offset (+08:00): %w", err)
	}
	return loc, nil
}

// sessionZone asks the server for the session's zone on a connection of
// its own (DATETIMEs are not read on it, so its loc does not matter).
//
// @@session.time_zone is SYSTEM (the server's OS zone, named by
// @@system_time_zone, often only an abbreviation such as CST), an offset
// (+08:00) or a name from MySQL's zone tables. A name Go knows whose offset
// now matches the server's is used as it is, so daylight-saving changes are
// followed; otherwise the offset the server reports now is used, with a
// warning: set MSGX_INBOX_TZ to the zone's IANA name if it has daylight
// saving time.
func sessionZone(ctx context.Context, mc *mysql.Config, log *slog.Logger) (*time.Location, string, error) {
	probe := mc.Clone()
	probe.Loc = time.UTC
	conn, err := mysql.NewConnector(probe)
	if err != nil {
		return nil, "", fmt.Errorf("asking MySQL for its time zone: %w", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if mc.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, mc.Timeout)
		defer cancel()
	}
	var tz, system string
	var offset int
	if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone, @@system_time_zone, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())").
		Scan(&tz, &system, &offset); err != nil {
		return nil, "", fmt.Errorf("asking MySQL for its time zone: %w", err)
	}
	// Whole minutes: both clocks are read in one statement, a second may
	// tick between them.
	offset = int(math.Round(float64(offset)/60)) * 60
	name, source := tz, "MySQL session time_zone "+tz
	if strings.EqualFold(tz, "SYSTEM") {
		name, source = system, "MySQL session time_zone SYSTEM, system_time_zone "+system
	}
	if loc, err := ParseZone(name); err == nil {
		if _, off := time.Now().In(loc).Zone(); off == offset {
			return loc, source, nil
		}
	}
	loc := time.FixedZone(name, offset)
	if offset == 0 {
		loc = time.UTC
	}
	if log != nil {
		log.Warn("the MySQL session's time zone is not a zone name msgx knows: using its offset now; "+
			"set MSGX_INBOX_TZ to its IANA name if it has daylight saving time", "component", "mysql",
			"time_zone", name, "offset", ZoneName(loc, time.Now()))
	}
	return loc, source + ", offset " + ZoneName(loc, time.Now()), nil
}

// zoneConnector opens inbox connections whose DATETIMEs are read and
// written in the inbox zone, which it learns on the first connection.
type zoneConnector struct {
	cfg  *mysql.Config
	zone *InboxZone

	mu    sync.Mutex
	inner driver.Connector
}

func (c *zoneConnector) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := c.connector(ctx)
	if err != nil {
		return nil, err
	}
	return inner.Connect(ctx)
}

func (c *zoneConnector) connector(ctx context.Context) (driver.Connector, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner != nil {
		return c.inner, nil
	}
	loc, err := c.zone.Location(ctx)
	if err != nil {
		return nil, err
	}
	mc := c.cfg.Clone()
	mc.Loc = loc
	inner, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("opening mysql: %w", err)
	}
	c.inner = inner
	return inner, nil
}

func (c *zoneConnector) Driver() driver.Driver { return &mysql.MySQLDriver{} }
