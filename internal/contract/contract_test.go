package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

const flightJSON = `{"flid":"100","operationDay":"2021-01-23","state":"ACTIVE","stateVersion":2,"lastMsgId":7,
"updatedAt":"2021-01-23T05:00:00Z","fields":{"FLNO":"CA100","SODT":"23JAN210535"},
"collections":{"GTDT":[{"GTNO":"1","GATE":"G28"}]},"mafl":[{"FLID":"101","FLNO":"MU100"}]}`

// The schemas accept what msgx writes and refuse what it does not: a field
// added to the code but not to the schema fails, as does a wrong type or
// an undocumented answer.
func TestContractsAcceptAndRefuse(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	event := `{"eventType":"UPSERT","flid":"100","stateVersion":2,"msgId":7,"source":"FLOP-ESTT","changed":["ESTT"],"flight":` + flightJSON + `}`
	for _, tc := range []struct {
		what string
		err  error
		ok   bool
	}{
		{"an event", c.Event([]byte(event)), true},
		{"a schd value", c.Schd([]byte(flightJSON)), true},
		{"a schd tombstone", c.Schd(nil), true},
		{"an event with a new field", c.Event([]byte(strings.Replace(event, `"msgId":7`, `"msgId":7,"partition":0`, 1))), false},
		{"a flight with a new field", c.Schd([]byte(strings.Replace(flightJSON, `"lastMsgId":7`, `"lastMsgId":7,"etag":"x"`, 1))), false},
		{"a flight with a lower-case MAFL key", c.Schd([]byte(strings.Replace(flightJSON, `"FLID":"101"`, `"flid":"101"`, 1))), false},
		{"an event of another type", c.Event([]byte(strings.Replace(event, "UPSERT", "DELETE", 1))), false},
		{"a bad timestamp", c.Schd([]byte(strings.Replace(flightJSON, "2021-01-23T05:00:00Z", "yesterday", 1))), false},
		{"GET /flights/100", c.Response("GET", "/flights/100", 200, "application/json", []byte(flightJSON)), true},
		{"GET /flights?day", c.Response("GET", "/flights", 200, "application/json", []byte("["+flightJSON+"]")), true},
		{"GET /flights/100 404", c.Response("GET", "/flights/100", 404, "text/plain; charset=utf-8", []byte("unknown flight 100\n")), true},
		{"GET /flights/100 as text", c.Response("GET", "/flights/100", 200, "text/plain", []byte("x")), false},
		{"GET /flights/100 418", c.Response("GET", "/flights/100", 418, "text/plain", []byte("x")), false},
		{"GET /nowhere", c.Response("GET", "/nowhere", 200, "application/json", []byte("{}")), false},
		{"POST /status", c.Response("POST", "/status", 200, "application/json", []byte("{}")), false},
		{"a status without its sections", c.Response("GET", "/status", 200, "application/json", []byte(`{"generatedAt":"2021-01-23T05:00:00Z","alerts":[]}`)), false},
	} {
		if (tc.err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.what, tc.err, tc.ok)
		}
	}
}

// Python's jsonschema loads deploy/schemas as they are (by their $ids, the
// relative $ref to flight.json resolving against them) and agrees with the
// Go validator on what msgx writes and what it does not.
func TestIndependentValidatorAgrees(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	event := `{"eventType":"UPSERT","flid":"100","stateVersion":2,"msgId":7,"source":"FLOP-ESTT","changed":["ESTT"],"flight":` + flightJSON + `}`
	good := []Check{
		{Schema: "msgx.msg.json", What: "an event", Instance: json.RawMessage(event)},
		{Schema: "msgx.schd.json", What: "a schd value", Instance: json.RawMessage(flightJSON)},
	}
	if err := c.Independent(good); err != nil {
		t.Fatal(err)
	}
	bad := []Check{
		{Schema: "msgx.msg.json", What: "an event with a new field", Instance: json.RawMessage(strings.Replace(event, `"msgId":7`, `"msgId":7,"partition":0`, 1))},
		{Schema: "msgx.schd.json", What: "a flight with a lower-case MAFL key", Instance: json.RawMessage(strings.Replace(flightJSON, `"FLID":"101"`, `"flid":"101"`, 1))},
		{Schema: "msgx.schd.json", What: "a bad timestamp", Instance: json.RawMessage(strings.Replace(flightJSON, "2021-01-23T05:00:00Z", "yesterday", 1))},
	}
	err = c.Independent(bad)
	if err == nil {
		t.Fatal("Python's jsonschema accepted what the schemas refuse")
	}
	for _, b := range bad {
		if !strings.Contains(err.Error(), b.What+":") {
			t.Errorf("Python's jsonschema did not refuse %s: %v", b.What, err)
		}
	}
	t.Log(err)
}
