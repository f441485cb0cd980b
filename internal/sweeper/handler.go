package sweeper

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/slaprobe/slaprobe/internal/webguard"
)

// Handler serves /-/sweep for the daemon, which mounts it behind the web
// config's authentication:
//
//	POST /-/sweep[?target=a&target=b]  start a sweep now: 202, 409 while one runs,
//	                                   403 while sweep.enabled is false
//	GET  /-/sweep                      the sweeper's state as JSON
//	DELETE /-/sweep                    stop the sweep in progress (its steps are kept): 202
//
// POST and DELETE refuse, 403 with the reason, what a web page of another
// site can send (webguard.StateChange): a form body, a foreign Origin, a
// browser's Sec-Fetch-Site: cross-site. Targets go in the query string.
func (s *Sweeper) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodDelete {
			if ref := webguard.StateChange(r); ref != nil {
				writeJSON(w, http.StatusForbidden, map[string]string{"status": "refused", "reason": ref.Reason, "error": ref.Message})
				return
			}
		}
		switch r.Method {
		case http.MethodPost:
			if err := r.ParseForm(); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"status": "error", "error": err.Error()})
				return
			}
			targets := r.Form["target"]
			err := s.Trigger(targets...)
			switch {
			case errors.Is(err, ErrDisabled):
				writeJSON(w, http.StatusForbidden, map[string]string{"status": "disabled", "error": err.Error()})
			case errors.Is(err, ErrBusy):
				snap := s.Snapshot()
				writeJSON(w, http.StatusConflict, map[string]any{"status": "busy", "error": err.Error(), "current_target": snap.Current})
			case err != nil:
				writeJSON(w, http.StatusBadRequest, map[string]string{"status": "error", "error": err.Error()})
			default:
				writeJSON(w, http.StatusAccepted, map[string]any{"status": "started", "targets": targets})
			}
		case http.MethodGet, http.MethodHead:
			writeJSON(w, http.StatusOK, s.Snapshot())
		case http.MethodDelete:
			s.Stop()
			writeJSON(w, http.StatusAccepted, map[string]string{"status": "stopping"})
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"status": "error", "error": "use POST to start a sweep, GET for its state, DELETE to stop it"})
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
