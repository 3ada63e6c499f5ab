package kafka

import (
	"strings"
	"testing"
)

func TestCheckTopicName(t *testing.T) {
	for name, ok := range map[string]bool{
		"msgx.inbox": true, "t2.msgx-router-table": true, "A_b-9.x": true, strings.Repeat("a", 249): true,
		"": false, ".": false, "..": false, strings.Repeat("a", 250): false,
		"my topic": false, "a/b": false, "tést": false, "${MSGX_KAFKA_PREFIX}x": false,
	} {
		if err := CheckTopicName(name); (err == nil) != ok {
			t.Errorf("CheckTopicName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
	for prefix, ok := range map[string]bool{"": true, ".": true, "t2.": true, "zuh-": true, "a b": false, "x:": false} {
		if err := CheckPrefix(prefix); (err == nil) != ok {
			t.Errorf("CheckPrefix(%q) = %v, want ok=%v", prefix, err, ok)
		}
	}
}
