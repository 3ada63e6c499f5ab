package router

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := Config{InboxTopic: "msgx.inbox", FlightTopic: "a", RefdataTopic: "b", Partitions: 1, MaxAttempts: 5, Backoff: "1s,2s,4s,8s", BackoffCap: time.Minute,
		IgnoreRules: "LDM-*", OpdayCutover: "00:00", ScheduleAbsent: "keep"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Backoff = "1s,2s,4s,8s,16s" }, "MSGX_BACKOFF has 5 tiers but MSGX_MAX_ATTEMPTS=5"},
		{func(c *Config) { c.MaxAttempts = 3 }, "MSGX_BACKOFF has 4 tiers"},
		{func(c *Config) { c.Backoff = "1s" }, "MSGX_BACKOFF has 1 tier but MSGX_MAX_ATTEMPTS=5 allows 4 waits"},
		{func(c *Config) { c.MaxAttempts = 2 }, "MSGX_BACKOFF has 4 tiers but MSGX_MAX_ATTEMPTS=2 allows 1 wait:"},
		{func(c *Config) { c.IgnoreRules = "LDM" }, "MSGX_IGNORE_RULES"},
		{func(c *Config) { c.OpdayCutover = "25:00" }, "MSGX_OPDAY_CUTOVER"},
		{func(c *Config) { c.ScheduleAbsent = "drop" }, "MSGX_SCHEDULE_ABSENT"},
	} {
		c := good
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want %q", err, tc.want)
		}
	}
}
