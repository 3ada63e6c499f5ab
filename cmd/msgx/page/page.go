package page

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

var index = template.Must(template.ParseFS(assets, "assets/index.html"))

// csp lets the page load nothing but its own script, style and data: no
// CDN, no external font, no inline script. A browser refuses anything else,
// so the page works on a closed network by construction.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handlers are the page's routes.
type Handlers struct {
	// Login is whether the read token is set: the page then offers to log
	// out.
	Login bool
	// History answers GET /status/history.
	History http.Handler
}

// Register adds GET / (the page), GET /assets/… (its script and style) and
// GET /status/history to mux. The page reads /status and /status/history
// itself, so the read token protects it like every other read endpoint.
func (h Handlers) Register(mux *http.ServeMux) {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/assets/", http.FileServerFS(sub))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Type", "text/html; charset=utf-8")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Security-Policy", csp)
		_ = index.Execute(w, struct{ Login bool }{h.Login})
	})
	mux.HandleFunc("GET /assets/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/assets/" || r.URL.Path == "/assets/index.html" {
			http.NotFound(w, r) // no listing; the page is served at /
			return
		}
		w.Header().Set("Content-Security-Policy", csp)
		// The assets change with the binary: the browser revalidates.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	mux.Handle("GET /status/history", h.History)
}

var tracePage = template.Must(template.ParseFS(assets, "assets/trace.html"))

// Trace is one trace shown as a page (GET /trace/…?format=html): the CLI's
// text in a <pre>, or why there is none, with links to the traces it names.
type Trace struct {
	// Title names what is traced: "message 42", "flight 100".
	Title string
	// Kind and ID fill the search box again ("message" or "flight").
	Kind, ID string
	// Text is the trace as `msgx trace` prints it; Error replaces it when
	// there is no trace (not found, PostgreSQL unreachable).
	Text, Error string
	// JSON is the same trace's JSON URL.
	JSON string
	// Links lead to the traces of the flights or messages it names.
	Links []Link
}

// Link is one link of a trace page.
type Link struct{ Label, Href string }

// WriteTrace writes t as a page with status code.
func WriteTrace(w http.ResponseWriter, code int, t Trace) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", csp)
	w.WriteHeader(code)
	_ = tracePage.Execute(w, t)
}
