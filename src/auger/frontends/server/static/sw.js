// The web UI's service worker, for notifications only: where a page cannot show one itself (Chrome on
// Android) it is shown through here (js/notify.js), and a click on it opens its session. It caches nothing
// and sees no request.
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(self.clients.openWindow(event.notification.data?.url || "/"));
});
