/// The page `desktop --web` serves: it plays the website. It shows the QR code (`qr.svg`) and the
/// `FIDO:/` link, marks each step as the desktop's events arrive (`events`), then the verified
/// result with the credential JSON, or the error. Plain HTML and JavaScript, no external resources;
/// its two URLs are relative, so they carry the token of the page's path (``WebPageToken``).
package enum DesktopWebPage {
    /// The HTML.
    package static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <link rel="icon" href="data:,">
        <title>HybridSim: sign in with your phone</title>
        <style>
        body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 56rem; padding: 0 1rem; color: #222; }
        h1 { font-size: 1.4rem; }
        #qr img { width: 16rem; height: 16rem; max-width: 100%; image-rendering: pixelated; border: 1px solid #ddd; }
        #link { font-family: monospace; font-size: .75rem; word-break: break-all; }
        ol#steps { list-style: none; padding: 0; }
        ol#steps li { padding: .25rem .5rem; margin: .2rem 0; border-left: .3rem solid #ccc; color: #666; }
        ol#steps li.done { border-color: #1f7a3a; color: #222; }
        ol#steps li.current { border-color: #c98a00; color: #222; font-weight: bold; }
        #result { display: none; border: 2px solid #1f7a3a; padding: 1rem; }
        #error { display: none; border: 2px solid #b00020; padding: 1rem; color: #b00020; }
        pre { background: #f5f5f5; padding: .75rem; overflow: auto; font-size: .75rem; max-height: 24rem; white-space: pre-wrap; overflow-wrap: anywhere; }
        </style>
        </head>
        <body>
        <h1 id="title">Use a passkey from your phone</h1>
        <p id="summary" aria-live="polite">Waiting for the desktop…</p>
        <noscript><p>This page shows the ceremony as it happens with JavaScript; without it, follow the desktop in its terminal.</p></noscript>
        <div id="qr" hidden><img alt="QR code to scan with the phone"><p>or open <a id="link" href="#"></a></p></div>
        <ol id="steps">
          <li data-step="qr">waiting for the phone (scan the QR code)</li>
          <li data-step="advert">phone nearby (advert received)</li>
          <li data-step="connected">tunnel joined</li>
          <li data-step="handshake">handshake done</li>
          <li data-step="request">request sent</li>
          <li data-step="response">response received</li>
          <li data-step="result">verified</li>
        </ol>
        <div id="result" role="status"><h2 id="outcome">Verified</h2><p id="verdict"></p><pre id="credential"></pre></div>
        <div id="error" role="alert"><h2>It did not work</h2><p id="message"></p></div>
        <script>
        const order = ["qr", "advert", "connected", "handshake", "request", "response", "result"];
        function mark(step) {
          const at = order.indexOf(step);
          if (at < 0) return;
          document.querySelectorAll("#steps li").forEach((li) => {
            const i = order.indexOf(li.dataset.step);
            li.className = i < at || (step === "result" && i === at) ? "done" : i === at ? "current" : "";
          });
        }
        // The relying party's answer to the posted result (--rp-url), when there is one.
        let rpVerdict = null;
        // Who checked the result, in words, for the verdict line.
        function checkedBy(e) {
          const here = e.rpCheck === "verified";
          if (rpVerdict && rpVerdict.accepted) return "the relying party accepted it: HTTP " + rpVerdict.status + (here ? "; checked here too" : "");
          if (here) return "checked by the built-in relying party";
          return "not checked here: the relying party that issued the options verifies it";
        }
        // Relative to the page, so below its token path (/s/TOKEN/): the server answers nothing else.
        const source = new EventSource("events");
        source.onmessage = (message) => {
          const e = JSON.parse(message.data);
          if ((e.event === "qr" || e.event === "contact") && e.request) {
            document.getElementById("title").textContent =
              e.request === "mc" ? "Create a passkey with your phone" : "Sign in with a passkey from your phone";
          }
          if (e.event === "qr") {
            const box = document.getElementById("qr");
            box.hidden = false;
            box.querySelector("img").src = "qr.svg";
            const link = document.getElementById("link");
            link.textContent = e.url;
            link.href = e.url;
            document.getElementById("summary").textContent =
              (e.request === "mc" ? "Create a passkey" : "Sign in") + " on " + e.rpId + " (" + e.origin + ")";
          }
          if (e.event === "contact") {
            document.getElementById("summary").textContent = "Contacting your linked phone " + e.phone + " (no QR code)";
            mark("advert");
            return;
          }
          if (e.event === "rpVerdict") {
            rpVerdict = e;
            return;
          }
          if (e.event === "result") {
            document.getElementById("qr").hidden = true;
            document.getElementById("result").style.display = "block";
            const verified = e.rpCheck === "verified" || (rpVerdict && rpVerdict.accepted);
            document.getElementById("outcome").textContent = verified ? "Verified" : "Done";
            if (!verified) document.querySelector('li[data-step="result"]').textContent = "done (the relying party that issued the options verifies it)";
            document.getElementById("verdict").textContent =
              (e.request === "mc" ? "Passkey registered" : "Signed in") + " on " + e.rpId + " (" + checkedBy(e) + ")";
            document.getElementById("credential").textContent = JSON.stringify(e.credential, null, 2);
            document.body.dataset.state = "result";
            source.close();
          }
          if (e.event === "error") {
            document.getElementById("qr").hidden = true;  // its tunnel is gone: scanning it now leads nowhere
            document.getElementById("error").style.display = "block";
            document.getElementById("message").textContent = e.message + " (" + e.kind + ", exit " + e.exitCode + ")";
            document.body.dataset.state = "error";
            source.close();
            return;
          }
          mark(e.event);
        };
        source.onerror = () => {
          if (!document.body.dataset.state) {
            document.getElementById("qr").hidden = true;
            document.getElementById("error").style.display = "block";
            document.getElementById("message").textContent = "lost the connection to the desktop";
            document.body.dataset.state = "error";
          }
          source.close();
        };
        </script>
        </body>
        </html>
        """
}
