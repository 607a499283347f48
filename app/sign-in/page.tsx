import type { Metadata } from "next";
import { Suspense } from "react";
import { AccountForm } from "@/components/auth/account-form";

export const metadata: Metadata = { title: "Sign in" };

export default function SignInPage() {
  return (
    <Suspense>
      <AccountForm kind="sign-in" />
    </Suspense>
  );
}
