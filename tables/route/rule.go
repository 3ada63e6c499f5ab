package route

import (
	"fmt"
	"strings"
)

// Rule is one ignore rule: TYPE and STYP, where STYP "*" matches any.
type Rule struct{ Type, STYP string }

// String renders the rule as configured (upper case), e.g. "LDM-*".
func (r Rule) String() string { return r.Type + "-" + r.STYP }

// ParseRules parses a comma-separated rule list such as "LDM-*,eror-*,FLOP-COBT".
func ParseRules(s string) ([]Rule, error) {
	var out []Rule
	for _, part := range strings.Split(s, ",") {
		part = strings.ToUpper(strings.TrimSpace(part))
		if part == "" {
			continue
		}
		typ, styp, ok := strings.Cut(part, "-")
		if !ok || typ == "" || styp == "" || strings.Contains(typ, "*") {
			return nil, fmt.Errorf("rule %q: want TYPE-STYP or TYPE-*", part)
		}
		out = append(out, Rule{Type: typ, STYP: styp})
	}
	return out, nil
}

// match returns the first rule matching TYPE/STYP (case-insensitive).
func match(rules []Rule, typ, styp string) (Rule, bool) {
	typ, styp = strings.ToUpper(typ), strings.ToUpper(styp)
	for _, r := range rules {
		if r.Type == typ && (r.STYP == "*" || r.STYP == styp) {
			return r, true
		}
	}
	return Rule{}, false
}
