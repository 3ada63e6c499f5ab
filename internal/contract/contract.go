package contract

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"msgx/internal/testenv"
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
	// Every schema is known by its own $id, as an integrator's validator
	// knows them: the relative references between them resolve against
	// it, and nothing is fetched from the network.
	files, err := filepath.Glob(filepath.Join(c.dir, "schemas", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		name := filepath.Base(f)
		obj, _ := doc.(map[string]any)
		if id, _ := obj["$id"].(string); id != SchemaID(name) {
			return nil, fmt.Errorf("deploy/schemas/%s: $id %q, want %q", name, id, SchemaID(name))
		}
		if err := c.compiler.AddResource(SchemaID(name), doc); err != nil {
			return nil, err
		}
	}
	if c.msg, err = c.compiler.Compile(SchemaID("msgx.msg.json")); err != nil {
		return nil, err
	}
	if c.schd, err = c.compiler.Compile(SchemaID("msgx.schd.json")); err != nil {
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

// Base is where deploy/ is published, by the schemas' $ids: a schema
// deploy/schemas/X has the $id Base + "schemas/X", so that openapi.yaml's
// references (schemas/X) and the schemas' own (X) resolve alike. The .example
// domain (RFC 2606) never resolves: validators must load the files, never
// fetch them.
const Base = "https://msgx.example/"

// SchemaID is the $id of deploy/schemas/name.
func SchemaID(name string) string { return Base + "schemas/" + name }

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
	s, media, err := c.documented(method, path, status, contentType)
	if err != nil {
		return err
	}
	sch, err := c.schema(s)
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

// SchemaFile is the file of deploy/schemas the OpenAPI document gives as
// the schema of an answer, "" when it gives another (an inline one, an
// array of them) or none.
func (c *Contracts) SchemaFile(method, path string, status int, contentType string) string {
	s, _, err := c.documented(method, path, status, contentType)
	if m, ok := s.(map[string]any); ok && err == nil {
		ref, _ := m["$ref"].(string)
		if name, ok := strings.CutPrefix(ref, "schemas/"); ok {
			return name
		}
	}
	return ""
}

// documented finds the schema of an answer in the OpenAPI document, with
// its media type.
func (c *Contracts) documented(method, path string, status int, contentType string) (schema any, media string, err error) {
	var op map[string]any
	for _, r := range c.paths {
		if r.match.MatchString(path) {
			op, _ = r.ops[strings.ToLower(method)].(map[string]any)
			if op == nil {
				return nil, "", fmt.Errorf("%s %s: %s has no %s operation", method, path, r.template, method)
			}
			break
		}
	}
	if op == nil {
		return nil, "", fmt.Errorf("%s %s: no path of openapi.yaml matches", method, path)
	}
	responses, _ := op["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(status)].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("%s %s: status %d is not documented", method, path, status)
	}
	if ref, ok := resp["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/components/responses/")
		comps, _ := c.docComponents.(map[string]any)
		all, _ := comps["responses"].(map[string]any)
		if resp, ok = all[name].(map[string]any); !found || !ok {
			return nil, "", fmt.Errorf("%s %s: unresolved response %s", method, path, ref)
		}
	}
	media, _, err = mime.ParseMediaType(contentType)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s %d: content type %q: %w", method, path, status, contentType, err)
	}
	content, _ := resp["content"].(map[string]any)
	mt, ok := content[media].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("%s %s %d: media type %s is not documented", method, path, status, media)
	}
	return mt["schema"], media, nil
}

// schema compiles a schema object of the OpenAPI document as a resource
// beside openapi.yaml, so that its references to schemas/… resolve to the
// schemas' $ids.
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
	u := fmt.Sprintf("%sopenapi.yaml.schema-%d.json", Base, c.n)
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

// Check is one instance to validate against one schema of deploy/schemas.
type Check struct {
	// Schema is the schema's file name (msgx.msg.json).
	Schema string `json:"schema"`
	// What names the instance in a refusal (a record, an answer).
	What     string          `json:"what"`
	Instance json.RawMessage `json:"instance"`
}

//go:embed validate.py
var pythonValidator string

// Independent validates checks with Python's jsonschema, a validator
// independent of the Go one above, loading deploy/schemas as an integrator
// does: every file as it is, by its $id (validate.py). The pinned packages
// of requirements.txt are installed once per machine (testenv.Python). It
// returns one line per instance that does not validate, nil when every one
// does.
func (c *Contracts) Independent(checks []Check) error {
	python, err := testenv.Python(filepath.Join(filepath.Dir(c.dir), "internal", "contract", "requirements.txt"))
	if err != nil {
		return err
	}
	in, err := json.Marshal(checks)
	if err != nil {
		return err
	}
	cmd := exec.Command(python, "-c", pythonValidator, filepath.Join(c.dir, "schemas"))
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 1 && stdout.Len() > 0:
		return fmt.Errorf("Python's jsonschema refuses %d of %d: %s", strings.Count(stdout.String(), "\n"), len(checks), strings.TrimSpace(stdout.String()))
	default:
		return fmt.Errorf("running Python's jsonschema (validate.py): %v: %s", err, strings.TrimSpace(stderr.String()))
	}
}
