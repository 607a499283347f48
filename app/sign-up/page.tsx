import type { Metadata } from "next";
import { Suspense } from "react";
import { AccountForm } from "@/components/auth/account-form";

export const metadata: Metadata = { title: "Make the first account" };

export default function SignUpPage() {
  return (
    <Suspense>
      <AccountForm kind="sign-up" />
    </Suspense>
  );
}
