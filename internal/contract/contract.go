package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// Contracts are the compiled schemas of deploy/.
type Contracts struct {
	dir      string // deploy/, absolute
	compiler *jsonschema.Compiler
	msg      *jsonschema.Schema
	schd     *jsonschema.Schema
	paths    []route
	// docComponents is the document's components (shared responses).
	docComponents any

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
	n        int
}

// route is one path template of the OpenAPI document.
type route struct {
	template string
	match    *regexp.Regexp
	ops      map[string]any
}

// Load reads deploy/ of the module the working directory belongs to.
func Load() (*Contracts, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, errors.New("contract: no go.mod above the working directory")
		}
		dir = parent
	}
	c := &Contracts{dir: filepath.Join(dir, "deploy"), compiled: map[string]*jsonschema.Schema{}}
	c.compiler = jsonschema.NewCompiler()
	c.compiler.DefaultDraft(jsonschema.Draft2020)
	c.compiler.AssertFormat()
	if c.msg, err = c.compiler.Compile(c.fileURL("schemas/msgx.msg.json")); err != nil {
		return nil, err
	}
	if c.schd, err = c.compiler.Compile(c.fileURL("schemas/msgx.schd.json")); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(c.dir, "openapi.yaml"))
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		return nil, fmt.Errorf("openapi.yaml: openapi %q, want 3.1.x", v)
	}
	paths, _ := doc["paths"].(map[string]any)
	for tmpl, ops := range paths {
		re := regexp.QuoteMeta(tmpl)
		re = regexp.MustCompile(`\\\{[^/]+?\\\}`).ReplaceAllString(re, `[^/]+`)
		m, _ := ops.(map[string]any)
		c.paths = append(c.paths, route{template: tmpl, match: regexp.MustCompile("^" + re + "$"), ops: m})
	}
	// Literal templates before those with parameters.
	sort.Slice(c.paths, func(i, j int) bool {
		return strings.Count(c.paths[i].template, "{") < strings.Count(c.paths[j].template, "{")
	})
	c.docComponents = doc["components"]
	return c, nil
}

func (c *Contracts) fileURL(rel string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(c.dir, rel))}).String()
}

// Event validates one msgx.msg record value.
func (c *Contracts) Event(value []byte) error { return validate(c.msg, value) }

// Schd validates one msgx.schd record value; a tombstone (no value) has no
// JSON to check.
func (c *Contracts) Schd(value []byte) error {
	if value == nil {
		return nil
	}
	return validate(c.schd, value)
}

func validate(s *jsonschema.Schema, body []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// Response validates an HTTP answer against the OpenAPI document: the path
// must be documented for the method, the status code for the operation, the
// media type for the response, and the body must validate against its
// schema (a text/plain body as a JSON string).
func (c *Contracts) Response(method, path string, status int, contentType string, body []byte) error {
	var op map[string]any
	for _, r := range c.paths {
		if r.match.MatchString(path) {
			op, _ = r.ops[strings.ToLower(method)].(map[string]any)
			if op == nil {
				return fmt.Errorf("%s %s: %s has no %s operation", method, path, r.template, method)
			}
			break
		}
	}
	if op == nil {
		return fmt.Errorf("%s %s: no path of openapi.yaml matches", method, path)
	}
	responses, _ := op["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(status)].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s: status %d is not documented", method, path, status)
	}
	if ref, ok := resp["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/components/responses/")
		comps, _ := c.docComponents.(map[string]any)
		all, _ := comps["responses"].(map[string]any)
		if resp, ok = all[name].(map[string]any); !found || !ok {
			return fmt.Errorf("%s %s: unresolved response %s", method, path, ref)
		}
	}
	media, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("%s %s %d: content type %q: %w", method, path, status, contentType, err)
	}
	content, _ := resp["content"].(map[string]any)
	mt, ok := content[media].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s %d: media type %s is not documented", method, path, status, media)
	}
	sch, err := c.schema(mt["schema"])
	if err != nil {
		return err
	}
	if media == "text/plain" {
		body, _ = json.Marshal(string(body))
	}
	if err := validate(sch, body); err != nil {
		return fmt.Errorf("%s %s %d: %w", method, path, status, err)
	}
	return nil
}

// schema compiles a schema object of the OpenAPI document as a resource in
// deploy/, so that its references to schemas/… resolve to the files.
func (c *Contracts) schema(s any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sch, ok := c.compiled[string(b)]; ok {
		return sch, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c.n++
	u := c.fileURL(fmt.Sprintf("openapi.yaml.schema-%d.json", c.n))
	if err := c.compiler.AddResource(u, doc); err != nil {
		return nil, err
	}
	sch, err := c.compiler.Compile(u)
	if err != nil {
		return nil, err
	}
	c.compiled[string(b)] = sch
	return sch, nil
}
