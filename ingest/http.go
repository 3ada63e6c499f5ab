package ingest

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"

	"msgx/internal/clock"
	"msgx/internal/retry"
)

// HTTPConfig configures the compatibility endpoint POST /cminmsgs/send.
type HTTPConfig struct {
	// MaxBody is the largest accepted body in bytes; larger bodies get 413.
	MaxBody int64 `env:"MSGX_HTTP_MAX_BODY" envDefault:"1048576"`
	// Token, when set, is required as "Authorization: Bearer <token>".
	Token string `env:"MSGX_HTTP_TOKEN"`
	// Timeout bounds one request, including the database insert.
	Timeout time.Duration `env:"MSGX_HTTP_TIMEOUT" envDefault:"10s"`
}

// Validate checks the values.
func (c HTTPConfig) Validate() error {
	if c.MaxBody < 1 {
		return errors.New("MSGX_HTTP_MAX_BODY: must be positive")
	}
	if c.Timeout <= 0 {
		return errors.New("MSGX_HTTP_TIMEOUT: must be positive")
	}
	return nil
}

// SendHandler serves POST /cminmsgs/send (docs/design.md#compat-endpoint): the
// body is one raw SIS XML message, inserted as a new inbox row. It answers 200
// text/plain with the new CMINMSGS_ID only after the insert committed, so a 200
// always means "durably received"; any failure is a 4xx/5xx and the sender
// retries. The row then reaches the pipeline through the bridge like any other,
// in ID order.
type SendHandler struct {
	Inbox *Inbox
	Cfg   HTTPConfig
	Clock clock.Clock
	Log   *slog.Logger
	// Disabled, when non-empty, refuses every request with 503 and this
	// reason (shadow mode never writes to MySQL).
	Disabled string
}

func (h *SendHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.Log.With("component", "compat-http")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if h.Cfg.Token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.Cfg.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="msgx"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	if h.Disabled != "" {
		http.Error(w, h.Disabled, http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.Cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("body larger than %d bytes", h.Cfg.MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	text, err := CheckXML(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Cfg.Timeout)
	defer cancel()
	id, err := h.Inbox.Insert(ctx, text, h.Clock.Now())
	if err != nil {
		status := http.StatusInternalServerError
		if retry.IsOutage(err) {
			status = http.StatusServiceUnavailable
		}
		log.Error("compat insert failed; the sender must retry", "err", err)
		http.Error(w, "inbox insert failed", status)
		return
	}
	log.Info("message received over HTTP", "msg_id", id, "bytes", len(body))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, strconv.FormatInt(id, 10))
}

var declaredEncoding = regexp.MustCompile(`(?i)^\s*<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9_.-]+)["']`)

// CheckXML verifies body is one well-formed XML document and returns it as
// UTF-8 text: the inbox column is utf8mb4, so a body sent as GB2312/GBK bytes
// is converted (its declaration is left as is; the decoder accepts UTF-8
// content under a GB declaration).
func CheckXML(body []byte) (string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", errors.New("empty body: want one SIS XML message")
	}
	if !utf8.Valid(body) {
		m := declaredEncoding.FindSubmatch(body)
		if m == nil || !isGB(string(m[1])) {
			return "", errors.New("body is not UTF-8 and declares no GB2312/GBK encoding")
		}
		conv, err := simplifiedchinese.GB18030.NewDecoder().Bytes(body)
		if err != nil {
			return "", fmt.Errorf("body is not valid %s: %w", m[1], err)
		}
		body = conv
	}
	dec := xml.NewDecoder(bytes.NewReader(body))
	// The content is UTF-8 by now whatever the declaration says.
	dec.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("not well-formed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return "", errors.New("not XML: text outside the root element")
			}
		}
	}
	if roots != 1 {
		return "", fmt.Errorf("not XML: want exactly one root element, found %d", roots)
	}
	return string(body), nil
}

func isGB(enc string) bool {
	switch strings.ToLower(enc) {
	case "gb2312", "gbk", "gb18030", "cp936", "x-gbk":
		return true
	}
	return false
}
