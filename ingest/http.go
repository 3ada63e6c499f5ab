package ingest

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"

	"msgx/internal/clock"
	"msgx/internal/retry"
	"msgx/internal/web"
	"msgx/sink/aodb"
)

// HTTPConfig configures the compatibility endpoint POST /cminmsgs/send.
type HTTPConfig struct {
	// MaxBody is the largest body POST /cminmsgs/send accepts, in bytes;
	// larger bodies get 413. 0 (the default): the largest message a
	// msgx.inbox record can carry, MSGX_KAFKA_MAX_MESSAGE_BYTES − 1280
	// (998 720 bytes by default, MaxRawBytes). A larger value is refused at
	// start-up, since such a body would be answered 200 and then end DEAD
	// raw-too-large.
	MaxBody int64 `env:"MSGX_HTTP_MAX_BODY" envDefault:"0"`
	// Token is the bearer token POST /cminmsgs/send requires, when set, as
	// "Authorization: Bearer <token>". Empty (the default): no token.
	Token string `env:"MSGX_HTTP_TOKEN"`
	// Timeout bounds the inbox insert of one POST /cminmsgs/send request.
	Timeout time.Duration `env:"MSGX_HTTP_TIMEOUT" envDefault:"10s"`
}

// Validate checks the values.
func (c HTTPConfig) Validate() error {
	if c.MaxBody < 0 {
		return errors.New("MSGX_HTTP_MAX_BODY: must not be negative (0: as large as a msgx.inbox record allows)")
	}
	if c.Timeout <= 0 {
		return errors.New("MSGX_HTTP_TIMEOUT: must be positive")
	}
	return nil
}

// CheckRecordLimit refuses a body limit above what a msgx.inbox record
// limited to maxMessageBytes (MSGX_KAFKA_MAX_MESSAGE_BYTES) can carry: the
// endpoint would answer 200 for a body the bridge can only record DEAD.
func (c HTTPConfig) CheckRecordLimit(maxMessageBytes int) error {
	if limit := int64(MaxRawBytes(maxMessageBytes)); c.MaxBody > limit {
		return fmt.Errorf("MSGX_HTTP_MAX_BODY=%d exceeds the largest message a msgx.inbox record carries with MSGX_KAFKA_MAX_MESSAGE_BYTES=%d (%d bytes): "+
			"such a body would be answered 200 and end DEAD raw-too-large; lower it, or set 0 for that largest size", c.MaxBody, maxMessageBytes, limit)
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
	Inbox *aodb.Tables
	Cfg   HTTPConfig
	// MaxMessageBytes is MSGX_KAFKA_MAX_MESSAGE_BYTES: a message whose
	// msgx.inbox record would exceed it gets 413, because the pipeline
	// would refuse it (0: no record limit).
	MaxMessageBytes int
	Clock           clock.Clock
	Log             *slog.Logger
	// Disabled, when non-empty, refuses every request with 503 and this
	// reason (shadow mode never writes to MySQL).
	Disabled string
}

// maxBody is the body limit in bytes (HTTPConfig.MaxBody).
func (h *SendHandler) maxBody() int64 {
	switch {
	case h.Cfg.MaxBody > 0:
		return h.Cfg.MaxBody
	case h.MaxMessageBytes > 0:
		return int64(MaxRawBytes(h.MaxMessageBytes))
	}
	return 1 << 20
}

func (h *SendHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.Log.With("component", "compat-http")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if h.Cfg.Token != "" && !web.Authorized(r, h.Cfg.Token) {
		web.Unauthorized(w)
		return
	}
	if h.Disabled != "" {
		http.Error(w, h.Disabled, http.StatusServiceUnavailable)
		return
	}
	limit := h.maxBody()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			http.Error(w, fmt.Sprintf("body larger than %d bytes", limit), http.StatusRequestEntityTooLarge)
		case web.IsTimeout(err):
			// The server's read timeout cut a slow sender off (counted by
			// the server); nothing was stored.
			log.Warn("slow sender cut off before its body arrived; nothing stored", "remote", r.RemoteAddr, "bytes_read", len(body))
			http.Error(w, "body not received within MSGX_HTTP_READ_TIMEOUT", http.StatusRequestTimeout)
		default:
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		}
		return
	}
	text, err := CheckXML(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The exact check the bridge makes: the text as stored (converted to
	// UTF-8), JSON-escaped in its record. 200 must mean "will be processed".
	if !Fits(text, h.MaxMessageBytes) {
		http.Error(w, fmt.Sprintf("message of %d bytes (%d as stored) does not fit a msgx.inbox record of at most %d bytes (MSGX_KAFKA_MAX_MESSAGE_BYTES)",
			len(body), len(text), h.MaxMessageBytes), http.StatusRequestEntityTooLarge)
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
// UTF-8 text, as the inbox stores it (the column is utf8mb4): a body sent as
// GB2312/GBK bytes is converted. The text must then say what it is, for any
// other reader of the inbox that honours the declaration: an encoding
// declared as anything but UTF-8 is rewritten to UTF-8. (A valid UTF-8 body
// under a GB declaration is taken as UTF-8, as the SIS decoder does.)
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
	if m := declaredEncoding.FindSubmatchIndex(body); m != nil && !isUTF8(string(body[m[2]:m[3]])) {
		body = slices.Concat(body[:m[2]], []byte("UTF-8"), body[m[3]:])
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

func isUTF8(enc string) bool {
	return strings.EqualFold(enc, "utf-8") || strings.EqualFold(enc, "utf8")
}

func isGB(enc string) bool {
	switch strings.ToLower(enc) {
	case "gb2312", "gbk", "gb18030", "cp936", "x-gbk":
		return true
	}
	return false
}
