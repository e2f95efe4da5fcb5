package login

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"
)

var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>{{.}}</title>
<style>body{font:16px system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}dt{font-weight:600}button{font-size:1em;padding:.4em 1.2em;margin-right:.5em}</style></head><body>{{end}}
{{define "message"}}{{template "head" .Title}}<h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>{{end}}
{{define "consent"}}{{template "head" "Allow access?"}}<h1>Allow {{.Client}} to use {{.Route}}?</h1>
<dl><dt>Application</dt><dd>{{.Client}} (returns to {{.Host}})</dd>
<dt>Signed in as</dt><dd>{{.User}}</dd>
<dt>Route</dt><dd>{{.Resource}}</dd>
<dt>Scopes</dt><dd>{{if .Scopes}}{{.Scopes}}{{else}}(none){{end}}</dd></dl>
<p>It will act as you on this route until you revoke it at <a href="{{.Consents}}">your approvals</a>.</p>
<form method="post" action="{{.Action}}"><input type="hidden" name="request" value="{{.Request}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="decision" value="allow">Allow</button><button type="submit" name="decision" value="deny">Deny</button></form></body></html>{{end}}
{{define "consents"}}{{template "head" "Your approvals"}}<h1>Applications you allowed</h1><p>Signed in as {{.User}}.</p>
{{if .List}}<ul>{{range .List}}<li>{{.Client}} on {{.Resource}} ({{.Scopes}}), since {{.Granted}}
<form method="post" action="{{$.Action}}" style="display:inline"><input type="hidden" name="client_id" value="{{.ClientID}}"><input type="hidden" name="csrf" value="{{$.CSRF}}"><button type="submit">Revoke</button></form></li>{{end}}</ul>
{{else}}<p>None.</p>{{end}}</body></html>{{end}}
`))

// page answers with a short HTML message.
func (s *Server) page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, "message", map[string]string{"Title": title, "Text": text}); err != nil {
		s.log.Debug("login: page", zap.Error(err))
	}
}

func userLabel(u User) string {
	if u.Email == "" && u.Username != "" {
		u.Email = u.Username
	}
	switch {
	case u.Email != "" && u.Name != "":
		return u.Name + " <" + u.Email + ">"
	case u.Email != "":
		return u.Email
	case u.Name != "":
		return u.Name + " (" + u.Subject + ")"
	}
	return u.Subject
}

// consentPage shows the consent form for p. The page is framed by no one
// (clickjacking) and its form posts only to the gateway.
func (s *Server) consentPage(w http.ResponseWriter, p *pending, bs *browserSession) {
	host := p.redirectURI
	if u, err := url.Parse(p.redirectURI); err == nil && u.Host != "" {
		host = u.Host
	}
	s.mu.Lock()
	route := s.routes[p.resource].path
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	_ = pages.ExecuteTemplate(w, "consent", map[string]any{
		"Client": p.clientName, "Host": host, "User": userLabel(*p.user), "Route": route, "Resource": p.resource,
		"Scopes": strings.Join(p.scopes, " "), "Request": p.id, "CSRF": bs.CSRF,
		"Action": s.issuer + "/oauth/consent", "Consents": s.issuer + "/oauth/consents",
	})
}

// serveConsents lists the signed-in user's approvals (GET) and revokes
// one (POST client_id): the client's refresh tokens for the user end too.
func (s *Server) serveConsents(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		bs, ok := s.checkForm(w, r)
		if !ok {
			return
		}
		s.revokeConsent(bs.User.Subject, r.PostForm.Get("client_id"))
		http.Redirect(w, r, s.issuer+"/oauth/consents", http.StatusSeeOther)
		return
	}
	bs := s.session(r)
	if bs == nil {
		s.SignIn(w, r, s.issuer+"/oauth/consents")
		return
	}
	type row struct{ Client, ClientID, Resource, Scopes, Granted string }
	var list []row
	s.store.mu.Lock()
	for _, c := range s.store.st.Consents {
		if c.Subject != bs.User.Subject {
			continue
		}
		name := c.ClientID
		if x := s.store.st.Clients[c.ClientID]; x != nil {
			name = x.Name
		}
		list = append(list, row{name, c.ClientID, c.Resource, strings.Join(c.Scopes, " "), c.Granted.UTC().Format(time.RFC3339)})
	}
	s.store.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Frame-Options", "DENY")
	_ = pages.ExecuteTemplate(w, "consents", map[string]any{"User": userLabel(bs.User), "List": list, "CSRF": bs.CSRF, "Action": s.issuer + "/oauth/consents"})
}

// revokeConsent forgets sub's approval of clientID and ends the grants it
// made.
func (s *Server) revokeConsent(sub, clientID string) {
	st := s.store
	st.mu.Lock()
	kept := st.st.Consents[:0]
	for _, c := range st.st.Consents {
		if !(c.Subject == sub && c.ClientID == clientID) {
			kept = append(kept, c)
		}
	}
	st.st.Consents = kept
	for id, f := range st.st.Families {
		if f.User.Subject == sub && f.ClientID == clientID {
			st.unindex(f)
			delete(st.st.Families, id)
		}
	}
	_ = st.save()
	st.mu.Unlock()
	s.gauges()
}
