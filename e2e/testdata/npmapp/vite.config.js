// vite build of vite.html (the test app's Vite entry).
export default { build: { rollupOptions: { input: "vite.html" } } };
