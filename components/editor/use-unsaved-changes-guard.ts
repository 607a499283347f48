"use client";

import { useEffect, useRef } from "react";

/**
 * Asks before unsaved edits are thrown away: closing or reloading the tab (`beforeunload`, the browser's own
 * question), a click on any link that leaves the page (Next's `<Link>` included: its click is caught at the document
 * in the capture phase, before React sees it), and Back or Forward (the Navigation API's `navigate` event, cancelled
 * when the user stays). Not `popstate`: it comes after the traversal, and the app router's listener, registered
 * first, has unmounted the editor before a later one runs.
 *
 * Next's app router offers no hook to block a navigation; `router.push` calls are not caught, so a page's own code
 * saves before it navigates (the editor's Launch does).
 */
export function useUnsavedChangesGuard(dirty: boolean, question: string): void {
  const guard = useRef({ dirty, question, leaving: false });
  guard.current.dirty = dirty;
  guard.current.question = question;

  useEffect(() => {
    const state = guard.current;
    const asking = () => state.dirty && !state.leaving;
    /** Asks; true when the user chose to leave (later questions are then not asked again). */
    const mayLeave = () => {
      state.leaving = window.confirm(state.question);
      return state.leaving;
    };

    const onBeforeUnload = (event: BeforeUnloadEvent) => {
      if (!asking()) return;
      event.preventDefault();
      event.returnValue = ""; // older browsers ask only when this is set
    };

    const onClick = (event: MouseEvent) => {
      // A click that opens another tab or window, or saves a file, leaves this page as it is.
      if (!asking() || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      const anchor = event.target instanceof Element ? event.target.closest("a[href]") : null;
      if (!(anchor instanceof HTMLAnchorElement) || anchor.hasAttribute("download") || (anchor.target && anchor.target !== "_self")) return;
      const to = new URL(anchor.href, window.location.href);
      if (to.origin === window.location.origin && to.pathname === window.location.pathname && to.search === window.location.search) return;
      if (mayLeave()) return;
      event.preventDefault();
      event.stopPropagation();
    };

    // Where the browser has no Navigation API (Chromium has), Back and Forward leave without asking.
    const navigation = (window as { navigation?: EventTarget }).navigation;
    const onNavigate = (event: Event) => {
      // A push or replace is the app router writing the address of a navigation already under way.
      if ((event as Event & { navigationType?: string }).navigationType !== "traverse" || !event.cancelable || !asking()) return;
      if (!mayLeave()) event.preventDefault();
    };

    window.addEventListener("beforeunload", onBeforeUnload);
    document.addEventListener("click", onClick, true);
    navigation?.addEventListener("navigate", onNavigate);
    return () => {
      window.removeEventListener("beforeunload", onBeforeUnload);
      document.removeEventListener("click", onClick, true);
      navigation?.removeEventListener("navigate", onNavigate);
    };
  }, []);
}
