// The knowledge page's upload, with a progress bar: the same form, sent by XHR so its upload progress shows.
// Without this script (or JavaScript) the form posts as it is and the browser shows its own progress.
// Served from /console/static under the page's CSP `script-src 'self'; connect-src 'self'`; no library, no build.
"use strict";
(function () {
  var form = document.getElementById("upload-form");
  var bar = document.getElementById("upload-progress");
  var status = document.getElementById("upload-status");
  if (!form || !bar || !status || !window.FormData) { return; }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.upload.addEventListener("progress", function (progress) {
      if (progress.lengthComputable) { bar.max = progress.total; bar.value = progress.loaded; }
    });
    xhr.upload.addEventListener("load", function () {
      bar.removeAttribute("value");  // sent: the server is indexing, for as long as it takes
      status.textContent = status.dataset.indexing;
    });
    xhr.addEventListener("load", function () {
      if (xhr.status === 200 && xhr.responseURL) { window.location.assign(xhr.responseURL); return; }
      // a refusal (a file it cannot read, a stale form): show the page the server answered with
      var answered = new DOMParser().parseFromString(xhr.responseText, "text/html").querySelector("main");
      if (answered) { document.querySelector("main").replaceWith(answered); } else { form.submit(); }
    });
    xhr.addEventListener("error", function () { status.textContent = status.dataset.failed; bar.hidden = true; });
    bar.hidden = false;
    bar.value = 0;
    status.textContent = status.dataset.sending;
    xhr.send(new FormData(form));
  });
})();
