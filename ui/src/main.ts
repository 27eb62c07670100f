import { mount } from 'svelte';
import './app.css';
import App from './App.svelte';
import { tauriBackend } from './lib/backend/index';
import { demoBackend } from './lib/backend/fake';
import type { Backend } from './lib/backend/types';

// Inside the Tauri window the real backend; in a plain browser (`npm run dev:fake`, `?fake`,
// or no Tauri at all) the in-memory fake with demo data.
const inTauri = '__TAURI_INTERNALS__' in window;
const params = new URLSearchParams(location.search);
const fake = import.meta.env.VITE_FAKE === '1' || params.has('fake') || !inTauri;
// `?fake&lang=zh` starts the demo in that language, as a saved setting would.
const lang = params.get('lang');
const backend: Backend = fake ? demoBackend({ language: lang === 'zh' || lang === 'es' || lang === 'en' ? lang : null }) : tauriBackend;

export default mount(App, { target: document.getElementById("app")!, props: { backend } });
