package login

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
)

const (
	// maxRegistration bounds a registration request and a Client ID
	// Metadata Document.
	maxRegistration = 64 << 10
	cimdTimeout     = 5 * time.Second
	// cimdTTL is how long a fetched metadata document is used.
	cimdTTL = 10 * time.Minute
	// maxRedirectURIs bounds one client's redirect URIs.
	maxRedirectURIs = 20
	maxClientName   = 200
	// maxFetching bounds the Client ID Metadata Documents fetched at once.
	maxFetching = 8
)

// window counts one source's registrations in the current minute.
type window struct {
	start time.Time
	n     int
}

// lookupClient finds client_id: pre-registered, registered, or (an https
// URL) its Client ID Metadata Document. The message says why not.
func (s *Server) lookupClient(ctx context.Context, id string) (*client, string) {
	if id == "" {
		return nil, "The request names no client_id."
	}
	s.mu.Lock()
	c := s.static[id]
	s.mu.Unlock()
	if c != nil {
		return c, ""
	}
	s.store.mu.Lock()
	if x := s.store.st.Clients[id]; x != nil && s.now().Sub(x.LastUsed) <= s.cfg.ClientIdleExpiry.D() {
		cp := *x
		c = &cp
	}
	s.store.mu.Unlock()
	if c != nil {
		return c, ""
	}
	if strings.HasPrefix(id, "https://") || (s.cimdHTTP && strings.HasPrefix(id, "http://")) {
		if !s.cfg.ClientMetadataDocumentsOn() {
			return nil, "Client ID Metadata Documents are off here (login.client_metadata_documents); register the client instead."
		}
		c, err := s.metadataClient(ctx, id)
		if err != nil {
			s.met.refusal("client_metadata")
			return nil, "The client's metadata document " + id + " cannot be used: " + err.Error()
		}
		return c, ""
	}
	return nil, "The client " + id + " is not registered here (or was forgotten after login.client_idle_expiry unused); let the application register again."
}

// metadataClient fetches (or reuses) the Client ID Metadata Document at
// id, under the outbound rules: https (http only from 127.0.0.1 with
// login.insecure_client_metadata_loopback), no private or loopback
// address otherwise, no redirects, bounded size and time.
func (s *Server) metadataClient(ctx context.Context, id string) (*client, error) {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || u.Path == "" || u.Path == "/" {
		return nil, errors.New("a client_id URL must be https with a path, without user info or fragment")
	}
	if u.Scheme == "http" && u.Hostname() != "127.0.0.1" && u.Hostname() != "::1" {
		return nil, errors.New("plain http is refused; a client metadata document must be https")
	}
	now := s.now()
	s.mu.Lock()
	if c := s.metaCache[id]; c != nil && now.Sub(c.Created) < cimdTTL {
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	// Fetches are bounded in number as in size and time: an authorize
	// request naming a document makes the gateway fetch it, and many at
	// once would hold as many connections.
	select {
	case s.fetching <- struct{}{}:
		defer func() { <-s.fetching }()
	default:
		s.met.refusal("client_metadata_busy")
		return nil, fmt.Errorf("%d client metadata documents are being fetched already; try again in a few seconds", cap(s.fetching))
	}
	ctx, cancel := context.WithTimeout(ctx, cimdTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.cimd.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistration+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxRegistration {
		return nil, fmt.Errorf("the document is larger than %d bytes", maxRegistration)
	}
	var doc struct {
		ClientID     string   `json:"client_id"`
		ClientName   string   `json:"client_name"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("the document is not a JSON object: %v", err)
	}
	if doc.ClientID != id {
		return nil, fmt.Errorf("the document's client_id %q is not its own URL", doc.ClientID)
	}
	if doc.AuthMethod != "" && doc.AuthMethod != "none" {
		return nil, fmt.Errorf("token_endpoint_auth_method %q is not supported (only none, with PKCE)", doc.AuthMethod)
	}
	if msg := checkRedirects(doc.RedirectURIs); msg != "" {
		return nil, errors.New(msg)
	}
	c := &client{ID: id, Name: clientName(doc.ClientName, id), RedirectURIs: doc.RedirectURIs, Created: now, LastUsed: now, Metadata: true}
	s.mu.Lock()
	if len(s.metaCache) >= s.cfg.MaxClients {
		for k, x := range s.metaCache {
			if now.Sub(x.Created) >= cimdTTL {
				delete(s.metaCache, k)
			}
		}
	}
	if len(s.metaCache) < s.cfg.MaxClients {
		s.metaCache[id] = c
	}
	s.mu.Unlock()
	s.gauges()
	return c, nil
}

func clientName(name, id string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		return id
	}
	if len(name) > maxClientName {
		name = name[:maxClientName]
	}
	return name
}

func checkRedirects(uris []string) string {
	if len(uris) == 0 {
		return "redirect_uris is empty"
	}
	if len(uris) > maxRedirectURIs {
		return fmt.Sprintf("more than %d redirect_uris", maxRedirectURIs)
	}
	for _, r := range uris {
		if msg := config.RedirectURIProblem(r); msg != "" {
			return msg
		}
	}
	return ""
}

// matchRedirect returns the redirect URI to use: given, it must equal a
// registered one exactly, except that a loopback http one matches with
// any port (RFC 8252 section 7.3); absent, the client must have exactly
// one.
func matchRedirect(c *client, given string) (string, bool) {
	if given == "" {
		if len(c.RedirectURIs) == 1 {
			return c.RedirectURIs[0], true
		}
		return "", false
	}
	if slices.Contains(c.RedirectURIs, given) {
		return given, true
	}
	g, err := url.Parse(given)
	if err != nil || g.Scheme != "http" || !loopback(g.Hostname()) || g.Fragment != "" || g.User != nil {
		return "", false
	}
	for _, r := range c.RedirectURIs {
		u, err := url.Parse(r)
		if err == nil && u.Scheme == "http" && u.Hostname() == g.Hostname() && u.Path == g.Path && u.RawQuery == g.RawQuery {
			return given, true
		}
	}
	return "", false
}

func loopback(h string) bool { return h == "127.0.0.1" || h == "::1" || h == "localhost" }

// serveRegister is RFC 7591 dynamic registration, bounded: at most
// login.registrations_per_minute per source address and login.max_clients
// in all (clients unused for login.client_idle_expiry are forgotten).
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.DynamicRegistrationOn() {
		s.regError(w, http.StatusNotFound, "invalid_request", "dynamic registration is off here (login.dynamic_registration)", "off")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		s.regError(w, http.StatusMethodNotAllowed, "invalid_request", "registration takes POST", "")
		return
	}
	now := s.now()
	src := sourceAddress(r)
	s.mu.Lock()
	win := s.regs[src]
	if win == nil || now.Sub(win.start) >= time.Minute {
		if win == nil && len(s.regs) >= maxSources {
			for k, x := range s.regs {
				if now.Sub(x.start) >= time.Minute {
					delete(s.regs, k)
				}
			}
		}
		if win == nil && len(s.regs) >= maxSources {
			s.mu.Unlock()
			w.Header().Set("Retry-After", "60")
			s.regError(w, http.StatusTooManyRequests, "invalid_request", "too many addresses are registering clients at once; try again in a minute", "registration_rate")
			return
		}
		win = &window{start: now}
		s.regs[src] = win
	}
	if win.n >= s.cfg.RegistrationsPerMinute {
		s.mu.Unlock()
		w.Header().Set("Retry-After", "60")
		s.regError(w, http.StatusTooManyRequests, "invalid_request", fmt.Sprintf("this address registered %d clients in the last minute (login.registrations_per_minute); try again later", win.n), "registration_rate")
		return
	}
	win.n++
	s.mu.Unlock()
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		ClientName   string   `json:"client_name"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRegistration+1))
	if err != nil || len(body) > maxRegistration {
		s.regError(w, http.StatusRequestEntityTooLarge, "invalid_client_metadata", fmt.Sprintf("the registration request is larger than %d bytes", maxRegistration), "")
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.regError(w, http.StatusBadRequest, "invalid_client_metadata", "the request is not a JSON object: "+err.Error(), "")
		return
	}
	if msg := checkRedirects(req.RedirectURIs); msg != "" {
		s.regError(w, http.StatusBadRequest, "invalid_redirect_uri", msg, "redirect_uri")
		return
	}
	for _, g := range req.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			s.regError(w, http.StatusBadRequest, "invalid_client_metadata", "grant type "+g+" is not supported (authorization_code and refresh_token are)", "")
			return
		}
	}
	// Every client is public (PKCE); one asking for a secret is told so
	// by the answer's token_endpoint_auth_method (RFC 7591 section 3.2.1).
	c := &client{ID: randomToken(18), Name: clientName(req.ClientName, ""), RedirectURIs: req.RedirectURIs, Created: now, LastUsed: now}
	if c.Name == "" {
		c.Name = "unnamed client " + c.ID[:6]
	}
	st := s.store
	st.mu.Lock()
	if len(st.st.Clients) >= s.cfg.MaxClients {
		st.sweep(now, s.cfg.ClientIdleExpiry.D())
	}
	if len(st.st.Clients) >= s.cfg.MaxClients {
		st.mu.Unlock()
		w.Header().Set("Retry-After", "3600")
		s.regError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the gateway keeps login.max_clients registered clients and has no room for another; ask the administrator to raise login.max_clients", "max_clients")
		return
	}
	st.st.Clients[c.ID] = c
	if err := st.save(); err != nil {
		delete(st.st.Clients, c.ID)
		st.mu.Unlock()
		s.log.Error("login: cannot write the state file", zap.Error(err))
		s.regError(w, http.StatusInternalServerError, "server_error", "the gateway cannot keep the registration (its state file cannot be written)", "")
		return
	}
	st.mu.Unlock()
	s.gauges()
	s.met.request("register", "ok")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id":                  c.ID,
		"client_id_issued_at":        now.Unix(),
		"client_name":                c.Name,
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": "none",
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
	})
}

// maxSources bounds the addresses whose registrations are counted.
const maxSources = 10000

func (s *Server) regError(w http.ResponseWriter, status int, code, desc, reason string) {
	if reason != "" {
		s.met.refusal(reason)
	}
	s.met.request("register", "refused")
	oauthError(w, status, code, desc)
}

// touchClient records that a registered client was used (its idle
// expiry starts again).
func (s *Server) touchClient(id string) {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if c := st.st.Clients[id]; c != nil && s.now().Sub(c.LastUsed) > time.Hour {
		c.LastUsed = s.now()
		_ = st.save()
	}
}

// oauthError writes an RFC 6749 section 5.2 error.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}
