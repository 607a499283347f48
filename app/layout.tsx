import type { Metadata } from "next";
import { NavBar } from "@/components/nav-bar";
import { TRPCReactProvider } from "@/components/trpc/provider";
import { serverEnv } from "@/server/env";
import "./globals.css";

export const metadata: Metadata = {
  title: { default: "Tinkerlab", template: "%s · Tinkerlab" },
  description: "Design, train and inspect reinforcement learning of language-model agents.",
};

export default function RootLayout({ children }: { children: React.ReactNode }) {
  return (
    <html lang="en">
      <body className="min-h-screen">
        <TRPCReactProvider>
          <NavBar accounts={serverEnv().TINKERLAB_AUTH === "team"} />
          <main className="mx-auto max-w-7xl px-6 py-8">{children}</main>
        </TRPCReactProvider>
      </body>
    </html>
  );
}
